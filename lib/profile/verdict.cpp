#include "profile/verdict.h"

#include <fmt/core.h>

#include <algorithm>
#include <functional>
#include <optional>

namespace libreyolo::profile {

namespace {

std::string percent(double fraction) { return fmt::format("{:.0f}%", 100 * fraction); }

constexpr const char* kDataloaderLevers = "workers↑, cache='ram'/'disk', lighter aug, larger batch";

// Data-parallel ranks that spend a large share of the step with collectives in flight: the
// gradient all-reduce, SyncBatchNorm's statistics, the loss sums. LibreYOLO has no such verdict.
constexpr const char* kCommunicationLevers =
    "sync_bn=false (two all-reduces per BatchNorm layer and pass otherwise), a larger batch per process, nbs accumulation "
    "(one gradient all-reduce per window), fewer processes per machine on the CPU, a faster link between devices (NVLink, "
    "InfiniBand)";

std::optional<Verdict> communication_verdict(const VerdictInputs& in) {
  if (!in.communication_fraction || *in.communication_fraction < kCommunicationShare) return std::nullopt;
  std::string why = fmt::format("collectives between the data-parallel ranks are in flight ~{} of the step",
                                percent(std::min(*in.communication_fraction, 1.0)));
  if (!in.slowest_rank_note.empty()) why += "; " + in.slowest_rank_note;
  return Verdict{.bound = "communication", .why = std::move(why), .levers = kCommunicationLevers};
}

// What differs between the devices on the one ladder below: the memory-pressure rung (a GPU's
// caching allocator), and each rung's words and levers.
struct DeviceWords {
  const char* waits;        // who waits on input data
  const char* trace;        // the trace busy time comes from
  const char* device;       // whose utilisation it measures
  const char* trace_lever;  // what to do when that trace is missing
  std::function<std::optional<Verdict>(const VerdictInputs&)> memory_pressure;
  std::function<std::string(const VerdictInputs&, double utilisation)> compute_why, host_why;
  std::function<std::string(const VerdictInputs&)> compute_levers, host_levers;
  const char* no_amp_lever;  // added to the compute and host / launch levers of a run without AMP ("": none)
};

std::optional<Verdict> gpu_memory_pressure(const VerdictInputs& in) {
  const bool allocator_pressure = in.allocator_calls_per_step && *in.allocator_calls_per_step >= kAllocatorCallsPerStep;
  const bool over_subscribed = in.busy_measured && in.utilisation_raw > kOverSubscribedUtilisation;
  if (!allocator_pressure && !over_subscribed) return std::nullopt;
  return Verdict{.bound = "memory-pressure",
                 .why = allocator_pressure
                            ? fmt::format("allocator/VRAM pressure (~{:.0f} cudaMalloc/free per step); throughput and utilisation are unreliable",
                                          *in.allocator_calls_per_step)
                            : fmt::format("kernel time exceeds the step ({} busy), a sign of allocator/VRAM pressure; throughput and "
                                          "utilisation are unreliable", percent(in.utilisation_raw)),
                 .levers = "lower batch, reduce activation memory, avoid running at the OOM edge"};
}

const DeviceWords& gpu_words() {
  static const DeviceWords words{
      .waits = "the GPU",
      .trace = "GPU kernel trace",
      .device = "GPU",
      .trace_lever = "fix the trace (run without Nsight/other CUPTI users, check CUPTI permissions) and profile again",
      .memory_pressure = gpu_memory_pressure,
      .compute_why = [](const VerdictInputs&, double utilisation) { return fmt::format("the GPU is saturated (~{} busy)", percent(utilisation)); },
      .host_why = [](const VerdictInputs& in, double utilisation) {
        return fmt::format("GPU only ~{} busy — fed too slowly: {} kernels/step at ~{:.0f}us each plus host overhead",
                           percent(utilisation), in.kernels_per_step, in.mean_kernel_us);
      },
      .compute_levers = [](const VerdictInputs&) { return std::string("already GPU-bound — try AMP/bf16 or a larger model"); },
      .host_levers = [](const VerdictInputs& in) {
        const std::string syncs = !in.host_syncs_per_step ? "fewer per-step .item()/syncs, "
                                  : *in.host_syncs_per_step > 0
                                      ? fmt::format("no per-step host syncs (this step has {}: each waits for the GPU to drain), ", in.host_syncs)
                                      : "";
        return "larger batch (amortize launches), " + syncs +
               "cuda_graph=true (one graph launch for the network's forward and backward; cuda_graph_scope=step also graphs the loss, "
               "optimizer and EMA)";
      },
      .no_amp_lever = "; amp=false: AMP/bf16 would use Tensor Cores"};
  return words;
}

// What bfloat16 can do for a compute-bound CPU step, from the run's own measurement where it
// has one (avx512_bf16 without AMX is 1.6x float32 on some CPUs and 0.7x on others).
std::string bfloat16_lever(const VerdictInputs& in) {
  if (!in.cpu_bf16_speedup) return in.amp ? "" : "amp_dtype=bfloat16 on a CPU with native bf16, ";
  const double speedup = *in.cpu_bf16_speedup;
  const std::string measured = fmt::format("a bfloat16 convolution ran {:.2f}x as fast as float32 here", speedup);
  if (in.amp) return speedup < 0.9 ? fmt::format("amp=false ({}), ", measured) : "";
  if (speedup >= 1.1) return fmt::format("amp=true amp_dtype=bfloat16 ({}), ", measured);
  return "";  // bfloat16 would not help
}

// The CPU analogue: the training thread either waits for data, runs operators, or does
// neither (framework overhead between operators: dispatch, allocation, bookkeeping).
const DeviceWords& cpu_words() {
  static const DeviceWords words{
      .waits = "the training thread",
      .trace = "operator trace",
      .device = "CPU",
      .trace_lever = "profile with profile_trace=true",
      .memory_pressure = nullptr,
      .compute_why = [](const VerdictInputs&, double utilisation) {
        return fmt::format("the CPU is busy in operators ~{} of the step", percent(utilisation));
      },
      .host_why = [](const VerdictInputs& in, double utilisation) {
        return fmt::format("operators fill only ~{} of the step; the rest ({:.1f} ms) is framework overhead between them",
                           percent(utilisation), in.host_overhead_ms);
      },
      .compute_levers = [](const VerdictInputs& in) {
        return "already compute-bound on the CPU — more cores (OMP_NUM_THREADS), a smaller imgsz or model, " + bfloat16_lever(in) +
               "or a GPU";
      },
      .host_levers = [](const VerdictInputs&) { return std::string("larger batch (amortize per-operator overhead), fewer per-step syncs and logging"); },
      .no_amp_lever = ""};
  return words;
}

}  // namespace

// One ladder for both devices, LibreYOLO's order, the first rung that holds: memory-pressure (a GPU's
// allocator), dataloader, communication, no verdict without a measured busy time, compute, host / launch.
Verdict decide_verdict(const VerdictInputs& in) {
  const DeviceWords& words = in.on_gpu ? gpu_words() : cpu_words();
  const double utilisation = std::min(in.utilisation_raw, 1.0);
  Verdict v;
  if (auto pressure = words.memory_pressure ? words.memory_pressure(in) : std::nullopt) {
    v = *pressure;
  } else if (in.dataload_fraction && *in.dataload_fraction >= kDataloaderShare) {
    v = {.bound = "dataloader",
         .why = fmt::format("{} waits on input data (~{} of the step)", words.waits, percent(*in.dataload_fraction)),
         .levers = kDataloaderLevers};
  } else if (auto communication = communication_verdict(in)) {
    v = *communication;
  } else if (!in.busy_measured) {
    v = {.bound = "unknown",
         .why = fmt::format("no {} ({}), so {} utilisation was not measured and no compute or host/launch verdict is drawn", words.trace,
                            in.busy_missing_reason.empty() ? "reason unknown" : in.busy_missing_reason, words.device),
         .levers = words.trace_lever};
  } else if (utilisation >= kComputeUtilisation) {
    v = {.bound = "compute", .why = words.compute_why(in, utilisation), .levers = words.compute_levers(in)};
  } else {
    v = {.bound = "host / launch", .why = words.host_why(in, utilisation), .levers = words.host_levers(in)};
  }
  if (!in.dataload_fraction && v.bound != "memory-pressure") v.why += " (dataloader stall not measurable from trace alone)";
  if (!in.amp && (v.bound == "compute" || v.bound == "host / launch")) v.levers += words.no_amp_lever;
  return v;
}

std::string verdict_label(const std::string& bound) {
  if (bound == "dataloader") return "DATALOADER-BOUND";
  if (bound == "host / launch") return "HOST/LAUNCH-BOUND";
  if (bound == "compute") return "COMPUTE-BOUND";
  if (bound == "communication") return "COMMUNICATION-BOUND";
  if (bound == "memory-pressure") return "MEMORY-PRESSURE";
  if (bound == "mixed") return "MIXED";
  return "NO VERDICT";
}

}  // namespace libreyolo::profile
