// `libreyolo profile run|summary|phases|kernels|ops|get|compare`: run the training profiler as a
// benchmark, and read what it wrote (profile.json, or a raw trace: ours or torch.profiler's).
// Flags are POSIX (--top 20) as in LibreYOLO; key=value works too (top=20).
#include "commands.h"
#include "core/error.h"
#include "profile/analysis.h"
#include "profile/report.h"
#include "profile/trials.h"
#include "profile_run.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <regex>

namespace libreyolo::cli {

namespace fs = std::filesystem;

namespace {

// key=value -> --key=value, so both spellings reach CLI11.
std::vector<std::string> cli11_arguments(const Arguments& arguments) {
  static const std::regex key_value(R"(^([A-Za-z][A-Za-z0-9_-]*)=(.*)$)");
  std::vector<std::string> out;
  for (const auto& a : arguments) {
    std::smatch m;
    out.push_back(std::regex_match(a, m, key_value) ? "--" + m[1].str() + "=" + m[2].str() : a);
  }
  std::reverse(out.begin(), out.end());  // CLI11 parses a reversed vector
  return out;
}

std::string cell(const nlohmann::ordered_json& value, int digits) {
  if (value.is_number_float()) return fmt::format("{:.{}f}", value.get<double>(), digits);
  if (value.is_number()) return std::to_string(value.get<std::int64_t>());
  if (value.is_null()) return "-";
  if (value.is_string()) return value.get<std::string>();
  return value.dump();
}

int summary_command(const nlohmann::ordered_json& p, const fs::path& file, bool json) {
  if (json) {
    nlohmann::ordered_json out;
    for (const char* key : {"schema", "model", "device_kind", "gpu_trace", "bound", "bound_why", "levers", "step_ms", "img_per_s",
                            "dataload_ms", "dataload_frac", "gpu_util", "cpu_util", "gpu_busy_ms_per_step", "cpu_busy_ms_per_step",
                            "kernels_per_step", "mean_kernel_us", "memcpy_ms_per_step", "tensorcore_pct", "peak_vram_mb",
                            "host_overhead_ms_per_step", "categories", "phases_gpu", "top_kernels"}) {
      if (p.contains(key)) out[key] = p[key];
    }
    fmt::print("{}\n", out.dump(2));
    return 0;
  }
  const fs::path timeline = file.parent_path() / "timeline.html";
  fmt::print("{}", profile::format_report(p, fs::exists(timeline) ? timeline.string() : "", p.contains("trace") && p["trace"].is_string() ? p["trace"].get<std::string>() : std::string()));
  return 0;
}

int phases_command(const nlohmann::ordered_json& p, bool json) {
  if (json) {
    fmt::print("{}\n", p["phases"].dump(2));
    return 0;
  }
  fmt::print("{:<20}{:>10}{:>10}{:>10}{:>10}\n", "phase", "gpu_ms", "wall_ms", "kernels", "ops");
  for (const auto& r : p["phases"]) {
    fmt::print("{:<20}{:>10}{:>10}{:>10}{:>10}\n", r.value("phase", ""), cell(r["gpu_ms_per_step"], 3), cell(r["wall_ms_per_step"], 3),
               cell(r["kernels_per_step"], 0), cell(r["ops_per_step"], 0));
  }
  return 0;
}

const nlohmann::ordered_json& rows_for_phase(const nlohmann::ordered_json& p, const char* all_key, const char* by_phase_key,
                                             const std::string& phase) {
  if (phase.empty()) return p[all_key];
  if (!p.contains(by_phase_key) || !p[by_phase_key].contains(phase)) {
    std::string known;
    if (p.contains(by_phase_key)) for (const auto& [name, rows] : p[by_phase_key].items()) known += (known.empty() ? "" : ", ") + name;
    throw UsageError(fmt::format("--phase {}: no such phase in this profile (phases: {})", phase, known.empty() ? "none" : known));
  }
  return p[by_phase_key][phase];
}

int kernels_command(const nlohmann::ordered_json& p, int top, const std::string& category, const std::string& grep,
                    bool tensorcore, const std::string& sort, const std::string& phase, bool json) {
  std::vector<nlohmann::ordered_json> rows;
  const std::regex pattern(grep.empty() ? "." : grep, std::regex::icase);
  for (const auto& k : rows_for_phase(p, "kernels", "kernels_by_phase", phase)) {
    if (!category.empty() && k.value("category", "").find(category) == std::string::npos) continue;
    if (!grep.empty() && !std::regex_search(k.value("raw_name", ""), pattern) && !std::regex_search(k.value("kernel", ""), pattern)) continue;
    if (tensorcore && !k.value("tensorcore", false)) continue;
    rows.push_back(k);
  }
  std::stable_sort(rows.begin(), rows.end(), [&](const auto& a, const auto& b) {
    if (sort == "count") return a.value("count_per_step", 0) > b.value("count_per_step", 0);
    if (sort == "name") return a.value("kernel", "") < b.value("kernel", "");
    return a.value("ms_per_step", 0.0) > b.value("ms_per_step", 0.0);
  });
  if (static_cast<int>(rows.size()) > top) rows.resize(static_cast<std::size_t>(top));
  if (json) {
    fmt::print("{}\n", nlohmann::ordered_json(rows).dump(2));
    return 0;
  }
  if (p.value("device_kind", "") != "cuda" || p["kernels"].empty()) {
    fmt::print(stderr, "no GPU kernels in this profile ({}); `libreyolo profile ops` lists the CPU operators\n",
               p.contains("gpu_trace") ? cell(p["gpu_trace"].value("reason", nlohmann::ordered_json()), 0) : "no GPU trace");
  }
  fmt::print("{:>6} {:>9} {:>7} {:>3}  {}\n", "%GPU", "ms/step", "x/step", "TC", "kernel [category]");
  for (const auto& k : rows) {
    fmt::print("{:>6.1f} {:>9.3f} {:>7} {:>3}  {} [{}]\n", k.value("pct_of_gpu", 0.0), k.value("ms_per_step", 0.0), k.value("count_per_step", 0),
               k.value("tensorcore", false) ? "TC" : "", k.value("kernel", ""), k.value("category", ""));
  }
  return 0;
}

int ops_command(const nlohmann::ordered_json& p, int top, const std::string& phase, bool json) {
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const auto& o : rows_for_phase(p, "ops", "ops_by_phase", phase)) {
    if (static_cast<int>(rows.size()) >= top) break;
    rows.push_back(o);
  }
  if (json) {
    fmt::print("{}\n", rows.dump(2));
    return 0;
  }
  fmt::print("{:>6} {:>9} {:>7}  {}\n", "%CPU", "ms/step", "x/step", "op");
  for (const auto& o : rows) {
    fmt::print("{:>6.1f} {:>9.3f} {:>7}  {}\n", o.value("pct_of_cpu_ops", 0.0), o.value("ms_per_step", 0.0), o.value("count_per_step", 0),
               o.value("op", ""));
  }
  return 0;
}

int get_command(const nlohmann::ordered_json& p, const std::string& field) {
  const auto& metrics = p["metrics"];
  if (field.empty()) {
    for (const auto& [name, value] : metrics.items()) fmt::print("{}\n", name);
    return 0;
  }
  if (!metrics.contains(field)) {
    throw UsageError(fmt::format("profile get: no metric '{}'; `libreyolo profile get <file>` lists them", field));
  }
  fmt::print("{}\n", cell(metrics[field], 4));
  return 0;
}

int compare_command(const nlohmann::ordered_json& a, const nlohmann::ordered_json& b, bool json) {
  const auto c = profile::compare_profiles(a, b);
  if (json) {
    fmt::print("{}\n", c.dump(2));
    return 0;
  }
  fmt::print("{:<20}{:>12}{:>12}{:>10}  {}\n", "metric", "before", "after", "Δ%", "");
  for (const auto& r : c["rows"]) {
    std::string mark;
    if (r.contains("significant")) mark = r["significant"].is_null() ? "(n<2: significance unknown)" : r["significant"].get<bool>() ? "significant" : "within noise";
    fmt::print("{:<20}{:>12}{:>12}{:>10}  {}\n", r.value("metric", ""), cell(r["before"], 3), cell(r["after"], 3),
               r.contains("delta_pct") ? cell(r["delta_pct"], 1) : "-", mark);
  }
  fmt::print("{:<20}{:>12}{:>12}\n", "verdict", c["bound"].value("before", ""), c["bound"].value("after", ""));
  return 0;
}

}  // namespace

int run_profile(const Arguments& arguments) {
  CLI::App app{"Profile training steps and read the profiles: where does the step time go?", "libreyolo profile"};
  app.require_subcommand(1);
  bool json = false;
  int top = 20;
  std::string file, other, field, category, grep, sort = "time", phase;
  bool tensorcore = false;
  ProfileRunOptions run;

  auto* run_cmd = app.add_subcommand("run", "train a few real steps with the profiler and print the verdict");
  run_cmd->add_option("data", run.data, "dataset YAML or built-in name (coco8, coco128)")->required();
  const models::Family& fresh = profile_family();
  std::string sizes;
  for (const auto& size : fresh.sizes()) sizes += fmt::format("{}{}", sizes.empty() ? "" : ", ", size);
  run_cmd->add_option("--weights,--model", run.model, fmt::format("weights file or model name (default: a fresh {}-<size>)", fresh.name()));
  run_cmd->add_option("--size", run.size, fmt::format("model size when no weights are given ({})", sizes));
  run_cmd->add_option("--batch", run.batch, "batch size")->check(CLI::PositiveNumber);
  run_cmd->add_option("--imgsz", run.image_size, "input size")->check(CLI::Range(32, 8192));
  run_cmd->add_option("--workers", run.workers, "data loader workers")->check(CLI::NonNegativeNumber);
  run_cmd->add_flag("--amp,!--no-amp", run.amp, "mixed precision (default on)");
  run_cmd->add_option("--amp_dtype", run.amp_dtype, "float16 or bfloat16 (bfloat16 is the CPU's mixed precision)")
      ->check(CLI::IsMember({"float16", "bfloat16", "fp16", "bf16", "half"}));
  run_cmd->add_option("--steps", run.steps, "measured steps")->check(CLI::Range(2, 100000));
  run_cmd->add_option("--warmup", run.warmup, "steps dropped first")->check(CLI::NonNegativeNumber);
  run_cmd->add_option("--repeat", run.repeat, "independent trials (mean and spread of img/s)")->check(CLI::Range(1, 1000));
  run_cmd->add_option("--device", run.device, "auto, cpu, 0, cuda:1");
  run_cmd->add_option("--project", run.project, "folder of the trial runs");
  run_cmd->add_option("--nproc_per_node", run.nproc_per_node, "data-parallel processes on this machine (as train)")->check(CLI::Range(1, 1024));
  run_cmd->add_option("--nnodes", run.nnodes, "machines of a data-parallel run")->check(CLI::Range(1, 4096));
  run_cmd->add_option("--node_rank", run.node_rank, "this machine's index, 0 to nnodes-1")->check(CLI::NonNegativeNumber);
  run_cmd->add_option("--master_addr", run.master_addr, "rank 0's address");
  run_cmd->add_option("--master_port", run.master_port, "rank 0's port (0: a free one on one machine)")->check(CLI::Range(0, 65535));
  run_cmd->add_option("--dist_backend", run.dist_backend, "auto, nccl or gloo")->check(CLI::IsMember({"auto", "nccl", "gloo"}));
  run_cmd->add_option("--sync_bn", run.sync_bn, "true or false (default: the model's)")->check(CLI::IsMember({"true", "false"}));
  run_cmd->add_flag("--cuda_graph,--cuda-graph", run.cuda_graph, "capture the network in a CUDA graph, as train's cuda_graph=true");
  run_cmd->add_option("--cuda_graph_scope", run.cuda_graph_scope, "with --cuda_graph: network, loss, optimizer or step (as train's cuda_graph_scope)")
      ->check(CLI::IsMember({"network", "loss", "optimizer", "step"}));
  run_cmd->add_flag("--json", json, "print the profile (or the repeat aggregate) as JSON on stdout");

  auto* summary_cmd = app.add_subcommand("summary", "the report of a profile");
  auto* phases_cmd = app.add_subcommand("phases", "per phase: GPU ms, wall ms, kernels, operators");
  auto* kernels_cmd = app.add_subcommand("kernels", "the GPU kernels, heaviest first");
  auto* ops_cmd = app.add_subcommand("ops", "the CPU operators, heaviest first");
  auto* get_cmd = app.add_subcommand("get", "one metric (no field: list the names)");
  auto* compare_cmd = app.add_subcommand("compare", "before/after: img/s (significance), utilisation, overhead, verdict");
  for (auto* cmd : {summary_cmd, phases_cmd, kernels_cmd, ops_cmd, get_cmd, compare_cmd}) {
    cmd->add_option("profile", file, "profile.json, a raw trace (profile_trace.json, torch.profiler's) or a run folder")->required();
    cmd->add_flag("--json", json, "JSON on stdout");
  }
  compare_cmd->add_option("after", other, "the second profile")->required();
  get_cmd->add_option("field", field, "metric name");
  for (auto* cmd : {kernels_cmd, ops_cmd}) {
    cmd->add_option("--top", top, "rows shown")->check(CLI::PositiveNumber);
    cmd->add_option("--phase", phase, "only this phase (dataload, to_device, forward, backward, optimizer, unphased)");
  }
  kernels_cmd->add_option("--category", category, "category substring (gemm, elementwise, norm, copy, other)");
  kernels_cmd->add_option("--grep", grep, "regular expression on the kernel name (case-insensitive)");
  kernels_cmd->add_flag("--tensorcore", tensorcore, "only Tensor Core kernels");
  kernels_cmd->add_option("--sort", sort, "time, count or name")->check(CLI::IsMember({"time", "count", "name"}));

  try {
    app.parse(cli11_arguments(arguments));
  } catch (const CLI::ParseError& error) {
    const int code = app.exit(error);
    return code == 0 ? 0 : static_cast<int>(ExitCode::usage);
  }
  if (run_cmd->parsed()) return run_profile_trials(run, json);
  if (!grep.empty()) {
    try {
      std::regex check(grep);
    } catch (const std::regex_error&) {
      throw UsageError(fmt::format("--grep {}: not a valid regular expression", grep));
    }
  }
  const auto p = profile::load_profile(file);
  if (summary_cmd->parsed()) return summary_command(p, file, json);
  if (phases_cmd->parsed()) return phases_command(p, json);
  if (kernels_cmd->parsed()) return kernels_command(p, top, category, grep, tensorcore, sort, phase, json);
  if (ops_cmd->parsed()) return ops_command(p, top, phase, json);
  if (get_cmd->parsed()) return get_command(p, field);
  return compare_command(p, profile::load_profile(other), json);
}

}  // namespace libreyolo::cli
