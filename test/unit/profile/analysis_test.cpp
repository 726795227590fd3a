#include "core/error.h"
#include "profile/analysis.h"
#include "profile/kernel_names.h"
#include "profile/report.h"
#include "profile/verdict.h"

#include <cmath>

#include "catch.h"  // last: see catch.h

using namespace libreyolo::profile;

namespace {

// Six steps of 100 us. Each step: forward launches a tensor-core GEMM (15 us), an elementwise
// (10 us) and a reduction (5 us) kernel; backward a batchnorm-backward (20 us) and a weight-grad
// (8 us) kernel: 58 us of kernels per step, 15 of them on Tensor Cores. With `operators`, the
// training thread's CPU operators too, named in order within each step's forward.
Trace synthetic_gpu_trace(double kernel_scale = 1.0, int mallocs_per_step = 0, const std::vector<std::string>& operators = {}) {
  Trace t;
  std::int64_t correlation = 0;
  for (int k = 0; k < 6; ++k) {
    const double s = 100.0 * k;
    t.events.push_back({.name = "ProfilerStep#" + std::to_string(k + 1), .category = category::annotation, .start_us = s, .duration_us = 100, .pid = 1, .tid = 1});
    t.events.push_back({.name = "step/forward", .category = category::annotation, .start_us = s + 10, .duration_us = 40, .pid = 1, .tid = 1});
    t.events.push_back({.name = "step/backward", .category = category::annotation, .start_us = s + 50, .duration_us = 40, .pid = 1, .tid = 1});
    const std::vector<std::pair<std::string, double>> kernels{
        {"sm80_xmma_gemm_f16f16_f16f32_f32_nn_n_tilesize128x128x32_h1688gemm", 15},
        {"void at::native::vectorized_elementwise_kernel<4, silu>", 10},
        {"void at::native::reduce_kernel<512, 1>", 5},
        {"void cudnn::bn_bw_1C11_kernel_new<float>", 20},
        {"sm80_xmma_wgrad_implicit_gemm_indexed_f32f32", 8}};
    for (int i = 0; i < 5; ++i) {
      const double launch = s + (i < 3 ? 20 + 10 * i : 60 + 10 * (i - 3));
      t.events.push_back({.name = "cudaLaunchKernel", .category = category::runtime, .start_us = launch, .duration_us = 2,
                          .pid = 1, .tid = 1, .correlation = correlation});
      t.events.push_back({.name = kernels[static_cast<std::size_t>(i)].first, .category = category::kernel, .start_us = launch + 5,
                          .duration_us = kernels[static_cast<std::size_t>(i)].second * kernel_scale, .pid = 0, .tid = 7,
                          .correlation = correlation});
      ++correlation;
    }
    for (std::size_t o = 0; o < operators.size(); ++o) {
      t.events.push_back({.name = operators[o], .category = category::cpu_op, .start_us = s + 11 + static_cast<double>(o),
                          .duration_us = 0.5, .pid = 1, .tid = 1});
    }
    for (int m = 0; m < mallocs_per_step; ++m) {
      t.events.push_back({.name = "cudaMalloc", .category = category::runtime, .start_us = s + 91 + m, .duration_us = 0.5, .pid = 1, .tid = 1});
    }
  }
  return t;
}

StepSummary gpu_summary(double step_ms, double dataload_ms) {
  StepSummary s;
  s.meta = {{"model", "YOLOv9-t"}, {"device", "cuda:0"}, {"batch", 8}, {"imgsz", 640}, {"amp", true}, {"amp_dtype", "float16"}, {"workers", 4}};
  s.warmup = 5, s.real_steps = 10, s.synced_steps = 10;
  s.step_ms = step_ms, s.dataload_ms = dataload_ms;
  s.composition_ms = {{"to_device", 0.001}, {"forward", 0.04}, {"backward", 0.04}, {"optimizer", 0.01}};
  s.device_kind = "cuda";
  s.kernels_measured = true;
  return s;
}

}  // namespace

TEST_CASE("kernel names: categories, Tensor Cores and friendly names", "[profile]") {
  CHECK(kernel_category("void cudnn::bn_bw_1C11_kernel_new<float>") == "reduction / norm");
  CHECK(kernel_category("nchwToNhwcKernel") == "layout / copy");
  CHECK(kernel_category("sm80_xmma_fprop_implicit_gemm") == "gemm / conv");
  CHECK(kernel_category("void at::native::CatArrayBatchedCopy<float>") == "layout / copy");
  CHECK(kernel_category("void at::native::vectorized_elementwise_kernel<4>") == "elementwise");
  CHECK(kernel_category("void at::native::reduce_kernel<512, 1>") == "reduction / norm");
  CHECK(kernel_category("my_custom_thing") == "other");
  CHECK(is_tensor_core_kernel("ampere_fp16_s16816gemm_fp16_128x128"));
  CHECK_FALSE(is_tensor_core_kernel("ampere_sgemm_128x64_nn"));
  CHECK(friendly_kernel_name("void cudnn::bn_fw_tr_1C11_kernel_NCHW") == "cudnn batchnorm (fwd)");
  CHECK(friendly_kernel_name("cutlass_80_implicitgemm_f16") == "cutlass conv (implicit gemm)");
  CHECK(friendly_kernel_name("void at::native::CatArrayBatchedCopy") == "concat");
}

TEST_CASE("window: ProfilerStep markers 2..8, the distinct steps inside", "[profile]") {
  const auto window = pick_window(synthetic_gpu_trace(), std::nullopt);
  CHECK(window.start_us == 200);
  CHECK(window.end_us == 500);
  CHECK(window.steps == 3);
}

TEST_CASE("synthetic GPU trace: known numbers and the host/launch verdict", "[profile]") {
  const auto p = analyze(synthetic_gpu_trace(), std::nullopt, "trace.json");
  CHECK(p["schema"] == "libreyolo.profile.analysis/v1");
  CHECK(p["kernels_per_step"] == 5);
  CHECK(p["mean_kernel_us"].get<double>() == Approx(58.0 / 5));
  CHECK(p["tensorcore_pct"].get<double>() == Approx(100.0 * 15 / 58).margin(0.01));
  CHECK(p["gpu_busy_ms_per_step"].get<double>() == Approx(0.058));
  CHECK(p["step_ms"].get<double>() == Approx(0.1));  // trace only: window wall / steps
  CHECK(p["gpu_util"].get<double>() == Approx(0.58).margin(1e-4));
  CHECK(p["bound"] == "host / launch");
  CHECK(p["bound_why"].get<std::string>().find("not measurable from trace alone") != std::string::npos);
  CHECK(p["top_kernels"][0]["kernel"] == "cudnn batchnorm (bwd)");
  CHECK(p["unique_kernels"] == 5);
  double phase_gpu = 0;
  for (const auto& row : p["phases"]) {
    if (row["gpu_ms_per_step"].is_number()) phase_gpu += row["gpu_ms_per_step"].get<double>();
    if (row["phase"] == "forward") CHECK(row["kernels_per_step"] == 3);
    if (row["phase"] == "backward") CHECK(row["kernels_per_step"] == 2);
  }
  CHECK(phase_gpu == Approx(p["gpu_busy_ms_per_step"].get<double>()).margin(1e-3));
  CHECK(p["metrics"]["forward_kernels"] == 3);
  CHECK(p["categories"][0]["name"] == "reduction / norm");  // 20 + 5 us, before gemm / conv 15 + 8 us
  CHECK(p["categories"][0]["ms_per_step"].get<double>() == Approx(0.025));
}

TEST_CASE("every verdict branch from a constructed case", "[profile]") {
  SECTION("compute: kernels fill 87% of the step") {
    const auto p = analyze(synthetic_gpu_trace(1.5), gpu_summary(0.1, 0.001), "t.json");
    CHECK(p["bound"] == "compute");
    CHECK(p["gpu_util"].get<double>() == Approx(0.87).margin(1e-3));
    CHECK(p["img_per_s"].get<double>() == Approx(8 / 0.0001));
  }
  SECTION("dataloader: half the step waits for data") {
    const auto p = analyze(synthetic_gpu_trace(1.5), gpu_summary(0.1, 0.05), "t.json");
    CHECK(p["bound"] == "dataloader");
    CHECK(p["dataload_frac"].get<double>() == Approx(0.5));
  }
  SECTION("memory-pressure: six cudaMalloc per step") {
    const auto p = analyze(synthetic_gpu_trace(1.0, 6), gpu_summary(0.1, 0.05), "t.json");
    CHECK(p["bound"] == "memory-pressure");
    CHECK(p["cuda_mallocs_per_step"].get<double>() == 6);
    CHECK(p["memory_pressure"] == true);
  }
  SECTION("memory-pressure: kernel time exceeds the step") {
    const auto p = analyze(synthetic_gpu_trace(), gpu_summary(0.05, 0.0), "t.json");
    CHECK(p["gpu_util_raw"].get<double>() > 1.05);
    CHECK(p["bound"] == "memory-pressure");
  }
  SECTION("host / launch with a summary") {
    const auto p = analyze(synthetic_gpu_trace(), gpu_summary(0.1, 0.001), "t.json");
    CHECK(p["bound"] == "host / launch");
    CHECK(p["host_overhead_ms_per_step"].get<double>() == Approx(0.1 - 0.058 - 0.001).margin(1e-6));
    CHECK(p["bound_why"].get<std::string>().find("trace alone") == std::string::npos);
  }
  SECTION("no GPU trace: no utilisation, no compute or host verdict") {
    StepSummary s = gpu_summary(0.1, 0.001);
    s.kernels_measured = false;
    s.trace_missing_reason = "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED: another profiler owns CUPTI";
    Trace t = synthetic_gpu_trace();
    std::erase_if(t.events, [](const Event& e) { return e.category == category::kernel; });
    const auto p = analyze(t, s, "t.json");
    CHECK(p["bound"] == "unknown");
    CHECK(p["gpu_util"].is_null());
    CHECK(p["gpu_trace"]["available"] == false);
    CHECK(p["bound_why"].get<std::string>().find("MULTIPLE_SUBSCRIBERS") != std::string::npos);
    CHECK(verdict_label(p["bound"]) == "NO VERDICT");
  }
  SECTION("no GPU trace but a starved loader: the dataloader verdict still holds") {
    StepSummary s = gpu_summary(0.1, 0.05);
    s.kernels_measured = false;
    s.trace_missing_reason = "CUPTI refused";
    CHECK(analyze(Trace{}, s, "t.json")["bound"] == "dataloader");
  }
}

TEST_CASE("CPU analogue: operator busy time on the training thread", "[profile]") {
  // Steps of 1000 us; forward ops cover [100, 600) with a nested op (counted once); an op on a
  // loader thread is not training-thread time.
  const auto cpu_trace = [](double op_us) {
    Trace t;
    for (int k = 0; k < 6; ++k) {
      const double s = 1000.0 * k;
      t.events.push_back({.name = "ProfilerStep#" + std::to_string(k), .category = category::annotation, .start_us = s, .duration_us = 1000, .pid = 1, .tid = 1});
      t.events.push_back({.name = "step/forward", .category = category::annotation, .start_us = s + 50, .duration_us = 900, .pid = 1, .tid = 1});
      t.events.push_back({.name = "aten::conv2d", .category = category::cpu_op, .start_us = s + 100, .duration_us = op_us, .pid = 1, .tid = 1});
      t.events.push_back({.name = "aten::convolution", .category = category::cpu_op, .start_us = s + 110, .duration_us = op_us / 2, .pid = 1, .tid = 1});
      t.events.push_back({.name = "aten::copy_", .category = category::cpu_op, .start_us = s + 100, .duration_us = 800, .pid = 1, .tid = 2});
    }
    return t;
  };
  StepSummary s;
  s.meta = {{"model", "YOLOv9-t"}, {"device", "cpu"}, {"batch", 2}, {"amp", false}};
  s.real_steps = 10, s.step_ms = 1.0, s.dataload_ms = 0.01, s.device_kind = "cpu";
  const auto host = analyze(cpu_trace(500), s, "t.json");
  CHECK(host["cpu_busy_ms_per_step"].get<double>() == Approx(0.5));
  CHECK(host["cpu_util"].get<double>() == Approx(0.5));
  CHECK(host["bound"] == "host / launch");
  CHECK(host["gpu_util"].is_null());
  CHECK(host["ops"][0]["op"] == "aten::copy_");
  const auto compute = analyze(cpu_trace(850), s, "t.json");
  CHECK(compute["bound"] == "compute");
  s.dataload_ms = 0.3;
  CHECK(analyze(cpu_trace(850), s, "t.json")["bound"] == "dataloader");
}

TEST_CASE("summary JSON round trip", "[profile]") {
  StepSummary s = gpu_summary(12.5, 3.0);
  s.peak_vram_mb = 5540;
  s.allocator_calls_per_step = 2;
  const auto j = summary_to_json(s);
  CHECK(j["real"]["img_per_s"].get<double>() == Approx(640.0));
  CHECK(j["real"]["dataload_frac"].get<double>() == Approx(0.24));
  const StepSummary back = summary_from_json(nlohmann::json::parse(j.dump()), "x");
  CHECK(back.step_ms == 12.5);
  CHECK(back.real_steps == 10);
  CHECK(*back.peak_vram_mb == 5540);
  CHECK(back.device_kind == "cuda");
  CHECK_THROWS_AS(summary_from_json(nlohmann::json::object(), "x.json"), libreyolo::UsageError);
}

TEST_CASE("data-parallel: collectives in flight, the slowest rank, the communication verdict", "[profile][dist]") {
  // Steps of 1000 us with 700 us of operators on the training thread. Gloo's all-reduce spans run
  // on two worker threads and overlap each other: [100, 400) and [300, 500) are 400 us in
  // flight. A span between the steps (an epoch's BatchNorm averaging) is not the step's, and one
  // that crosses the step's end counts up to it.
  const auto trace = [](double gloo_scale) {
    Trace t;
    for (int k = 0; k < 6; ++k) {
      const double s = 2000.0 * k;  // 1000 us of gap after each step
      t.events.push_back({.name = "ProfilerStep#" + std::to_string(k + 1), .category = category::annotation, .start_us = s, .duration_us = 1000, .pid = 1, .tid = 1});
      t.events.push_back({.name = "step/forward", .category = category::annotation, .start_us = s, .duration_us = 1000, .pid = 1, .tid = 1});
      t.events.push_back({.name = "aten::conv2d", .category = category::cpu_op, .start_us = s, .duration_us = 700, .pid = 1, .tid = 1});
      t.events.push_back({.name = "gloo:all_reduce", .category = category::cpu_op, .start_us = s + 100, .duration_us = 300 * gloo_scale, .pid = 1, .tid = 8});
      t.events.push_back({.name = "gloo:all_reduce", .category = category::cpu_op, .start_us = s + 300, .duration_us = 200 * gloo_scale, .pid = 1, .tid = 9});
      t.events.push_back({.name = "gloo:all_reduce", .category = category::cpu_op, .start_us = s + 1200, .duration_us = 500, .pid = 1, .tid = 8});
      t.events.push_back({.name = "aten::copy_", .category = category::cpu_op, .start_us = s + 1200, .duration_us = 500, .pid = 1, .tid = 1});
    }
    return t;
  };
  StepSummary s;
  s.meta = {{"model", "YOLOv9-t"}, {"device", "cpu"}, {"batch", 4}, {"amp", false}, {"world_size", 2}};
  s.real_steps = 3, s.synced_steps = 3, s.ops_in_synced_half = true;
  s.step_ms = 1.0, s.dataload_ms = 0.0, s.device_kind = "cpu";
  s.ranks = {{.rank = 0, .step_ms = 1.0, .dataload_ms = 0.0}, {.rank = 1, .step_ms = 1.25, .dataload_ms = 0.1}};

  const auto p = analyze(trace(1.0), s, "t.json");
  const auto& d = p["distributed"];
  CHECK(d["world_size"] == 2);
  CHECK(d["ranks"].size() == 2);
  CHECK(d["slowest_rank"]["rank"] == 1);
  CHECK(d["fastest_rank"]["rank"] == 0);
  CHECK(d["rank_spread_pct"].get<double>() == Approx(25.0));
  CHECK(d["collective_ms_per_step"].get<double>() == Approx(0.4));
  CHECK(d["collective_frac"].get<double>() == Approx(0.4));
  CHECK(p["cpu_busy_ms_per_step"].get<double>() == Approx(0.7));  // the copy between steps is not the step's
  CHECK(p["bound"] == "communication");
  CHECK(verdict_label(p["bound"]) == "COMMUNICATION-BOUND");
  CHECK(p["bound_why"].get<std::string>().find("rank 1 is the slowest") != std::string::npos);
  CHECK(p["metrics"]["collective_frac"].get<double>() == Approx(0.4));

  // a quarter of the collectives: [100, 175) and [300, 350), 125 us in flight, and the CPU verdict stands
  const auto light = analyze(trace(0.25), s, "t.json");
  CHECK(light["distributed"]["collective_ms_per_step"].get<double>() == Approx(0.125));
  CHECK(light["bound"] == "host / launch");

  // one process: no distributed block, and the summary round-trips the ranks
  StepSummary one = s;
  one.ranks.clear();
  Trace plain = trace(1.0);
  std::erase_if(plain.events, [](const Event& e) { return e.name.starts_with("gloo:"); });
  CHECK(analyze(plain, one, "t.json")["distributed"].is_null());
  const StepSummary back = summary_from_json(nlohmann::json::parse(summary_to_json(s).dump()), "x");
  REQUIRE(back.ranks.size() == 2);
  CHECK(back.ranks[1].step_ms == 1.25);
  CHECK(back.ranks[1].dataload_ms == Approx(0.1));
}

TEST_CASE("GPU data-parallel: NCCL kernels are communication, not compute or over-subscription", "[profile][dist]") {
  // The synthetic GPU step (58 us of compute kernels in 100 us) plus an NCCL all-reduce of 50 us
  // on its own stream: the utilisation stays 58%, the collectives fill half the step.
  Trace t = synthetic_gpu_trace();
  for (int k = 0; k < 6; ++k) {
    t.events.push_back({.name = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", .category = category::kernel,
                        .start_us = 100.0 * k + 40, .duration_us = 50, .pid = 0, .tid = 9});
  }
  StepSummary s = gpu_summary(0.1, 0.001);
  s.ranks = {{.rank = 0, .step_ms = 0.1, .dataload_ms = 0.001}, {.rank = 1, .step_ms = 0.1, .dataload_ms = 0.001}};
  const auto p = analyze(t, s, "t.json");
  CHECK(p["gpu_util"].get<double>() == Approx(0.58).margin(1e-3));
  CHECK(p["distributed"]["collective_gpu_ms_per_step"].get<double>() == Approx(0.05));
  CHECK(p["bound"] == "communication");
}

TEST_CASE("GPU host syncs: the operators that wait for the device, counted per step and named in the host/launch levers", "[profile]") {
  const std::vector<std::string> syncing{"aten::add", "aten::nonzero", "aten::_local_scalar_dense", "aten::nonzero", "aten::mul"};
  const auto p = analyze(synthetic_gpu_trace(1.0, 0, syncing), gpu_summary(0.1, 0.001), "t.json");
  REQUIRE(p["bound"] == "host / launch");
  CHECK(p["host_syncs_per_step"].get<double>() == 3);
  CHECK(p["host_sync_ops"] == nlohmann::ordered_json({{"aten::_local_scalar_dense", 1}, {"aten::nonzero", 2}}));
  CHECK(p["metrics"]["host_syncs_per_step"].get<double>() == 3);
  CHECK(p["levers"].get<std::string>().find(
            "no per-step host syncs (this step has aten::_local_scalar_dense 1/step, aten::nonzero 2/step: each waits for the GPU to drain)") !=
        std::string::npos);
  const std::string report = format_report(p, "", "");
  CHECK(report.find("host syncs 3/step: aten::_local_scalar_dense 1, aten::nonzero 2") != std::string::npos);

  const auto clean = analyze(synthetic_gpu_trace(1.0, 0, {"aten::add", "aten::mul"}), gpu_summary(0.1, 0.001), "t.json");
  CHECK(clean["host_syncs_per_step"].get<double>() == 0);
  CHECK(clean["levers"].get<std::string>().find("sync") == std::string::npos);  // measured: none to remove
  CHECK(format_report(clean, "", "").find("host syncs 0/step  (") != std::string::npos);

  // An epoch's end between two steps (a checkpoint reads the weights back, 2 reads): not the step's.
  // The steps end 5 us early here, the reads land in that gap; one more inside each step counts.
  Trace epochs = synthetic_gpu_trace(1.0, 0, {"aten::add", "aten::_local_scalar_dense"});
  for (Event& e : epochs.events) {
    if (e.name.starts_with("ProfilerStep#")) e.duration_us = 95;
  }
  for (int k = 0; k < 6; ++k) {
    for (int r = 0; r < 2; ++r) {
      epochs.events.push_back({.name = "aten::_local_scalar_dense", .category = category::cpu_op, .start_us = 100.0 * k + 96 + r,
                               .duration_us = 0.5, .pid = 1, .tid = 1});
    }
  }
  const auto between = analyze(epochs, gpu_summary(0.1, 0.001), "t.json");
  CHECK(between["host_syncs_per_step"].get<double>() == 1);
  CHECK(between["host_sync_ops"] == nlohmann::ordered_json({{"aten::_local_scalar_dense", 1}}));

  const auto unmeasured = analyze(synthetic_gpu_trace(), gpu_summary(0.1, 0.001), "t.json");  // no operator trace
  CHECK(unmeasured["host_syncs_per_step"].is_null());
  CHECK(unmeasured["levers"].get<std::string>().find("fewer per-step .item()/syncs") != std::string::npos);
  CHECK(format_report(unmeasured, "", "").find("host syncs") == std::string::npos);
}

TEST_CASE("CPU compute verdict: the bfloat16 lever follows the run's own measurement", "[profile]") {
  VerdictInputs in;
  in.on_gpu = false;
  in.dataload_fraction = 0.0;
  in.utilisation_raw = 0.95;
  in.amp = false;
  const auto levers = [&] { return decide_verdict(in).levers; };
  REQUIRE(decide_verdict(in).bound == "compute");
  CHECK(levers().find("amp_dtype=bfloat16 on a CPU with native bf16") != std::string::npos);  // not measured
  in.cpu_bf16_speedup = 1.65;
  CHECK(levers().find("amp=true amp_dtype=bfloat16 (a bfloat16 convolution ran 1.65x as fast as float32 here)") !=
        std::string::npos);
  in.cpu_bf16_speedup = 0.7;  // float32 run, bfloat16 slower: no bfloat16 lever
  CHECK(levers().find("bfloat16") == std::string::npos);
  in.amp = true;  // a bfloat16 run that float32 would beat
  CHECK(levers().find("amp=false (a bfloat16 convolution ran 0.70x as fast as float32 here)") != std::string::npos);
  in.cpu_bf16_speedup = 1.65;  // a bfloat16 run that pays
  CHECK(levers().find("amp") == std::string::npos);
}
