#include "profile/analysis.h"

#include "profile/analysis_parts.h"

#include "core/error.h"
#include "profile/kernel_names.h"
#include "profile/verdict.h"
#include "train/host_reads.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <unordered_map>

namespace libreyolo::profile {

using namespace parts;  // NOLINT: the analysis's own parts (analysis_parts.h)

AnalysisWindow pick_ops_window(const Trace& trace, const std::optional<StepSummary>& summary) {
  const auto steps = step_markers(trace);
  if (!summary || !summary->ops_in_synced_half || summary->real_steps <= 0 ||
      steps.size() <= static_cast<std::size_t>(summary->real_steps)) {
    return pick_window(trace, summary);
  }
  AnalysisWindow window;
  window.start_us = steps[static_cast<std::size_t>(summary->real_steps)]->start_us;
  for (std::size_t i = static_cast<std::size_t>(summary->real_steps); i < steps.size(); ++i) {
    window.end_us = std::max(window.end_us, steps[i]->end_us());
  }
  count_steps(window, steps);
  return window;
}

AnalysisWindow pick_window(const Trace& trace, const std::optional<StepSummary>& summary) {
  const auto steps = step_markers(trace);
  AnalysisWindow window;
  const std::size_t n = steps.size();
  if (n >= 4) {
    std::size_t last = std::min<std::size_t>(n - 1, 8);
    if (summary && summary->real_steps > 0) last = std::min<std::size_t>(last, static_cast<std::size_t>(summary->real_steps));
    const std::size_t first = last > 2 ? 2 : 0;
    window.start_us = steps[first]->start_us;
    window.end_us = steps[last]->start_us;
  } else if (n > 0) {
    window.start_us = steps.front()->start_us;
    window.end_us = 0;
    for (const Event* e : steps) window.end_us = std::max(window.end_us, e->end_us());
  } else {
    double lo = INFINITY, hi = -INFINITY;
    for (const auto& e : trace.events) lo = std::min(lo, e.start_us), hi = std::max(hi, e.end_us());
    window.start_us = std::isfinite(lo) ? lo : 0;
    window.end_us = std::isfinite(hi) ? hi : 0;
  }
  count_steps(window, steps);
  return window;
}

nlohmann::ordered_json analyze(const Trace& trace, const std::optional<StepSummary>& summary, const std::string& trace_path) {
  const AnalysisWindow window = pick_window(trace, summary);
  const AnalysisWindow ops_window = pick_ops_window(trace, summary);
  const int steps = window.steps;
  const int op_steps = ops_window.steps;
  Collected collected = collect_events(trace, window, ops_window);
  auto& [kernels, ops, kernels_by_phase, ops_by_phase, present, kernels_in_trace, allocator_calls, runtime_events, memcpy_us,
         tensor_core_us, category_us, op_intervals, span_us, training_threads, collective_ops, collective_kernels, host_reads] = collected;

  const bool on_gpu = summary ? summary->device_kind == "cuda" : kernels_in_trace > 0;
  const bool kernels_measured = on_gpu && kernels_in_trace > 0 && (!summary || summary->kernels_measured);
  const bool ops_measured = !op_intervals.empty();
  const bool busy_measured = on_gpu ? kernels_measured : ops_measured;
  std::string missing_reason;
  if (!busy_measured) {
    if (summary && !summary->trace_missing_reason.empty()) {
      missing_reason = summary->trace_missing_reason;
    } else {
      missing_reason = on_gpu ? "the trace holds no GPU kernel events" : "the trace holds no CPU operator events";
    }
  }

  const double wall_ms = (window.end_us - window.start_us) / 1000.0;
  const double step_ms = summary ? summary->step_ms : wall_ms / steps;
  std::optional<double> dataload_ms;
  if (summary) {
    dataload_ms = summary->dataload_ms;
  } else if (span_us.contains("dataload")) {
    dataload_ms = span_us["dataload"] / 1000.0 / steps;  // the unsynchronised spans of our own trace
  }
  std::optional<double> dataload_fraction;
  if (dataload_ms && step_ms > 0) dataload_fraction = *dataload_ms / step_ms;

  const double kernel_us = total_us(kernels);
  std::int64_t kernel_count = 0;
  for (const auto& [name, t] : kernels) kernel_count += t.count;
  // NCCL kernels run on their own stream beside the compute: the utilisation (and the
  // over-subscription test) counts the compute kernels only; communication is measured apart.
  double collective_kernel_us = 0;
  for (const auto& [start, end] : collective_kernels) collective_kernel_us += end - start;
  const double gpu_busy_ms = std::max(kernel_us - collective_kernel_us, 0.0) / 1000.0 / steps;
  const double mean_kernel_us = kernel_count ? kernel_us / static_cast<double>(kernel_count) : 0.0;
  const std::int64_t kernels_per_step = kernel_count / steps;

  std::vector<std::pair<double, double>> training_ops;
  if (training_threads.empty() && !op_intervals.empty()) {
    auto busiest = std::max_element(op_intervals.begin(), op_intervals.end(),
                                    [](const auto& a, const auto& b) { return busy_us(a.second) < busy_us(b.second); });
    training_threads.insert(busiest->first);
  }
  for (const auto& thread : training_threads) {
    if (const auto found = op_intervals.find(thread); found != op_intervals.end()) {
      training_ops.insert(training_ops.end(), found->second.begin(), found->second.end());
    }
  }
  // the operator steps themselves: what runs between them (an epoch's end) is not the step's
  std::vector<std::pair<double, double>> op_step_spans;
  for (const Event* marker : step_markers(trace)) {
    if (marker->start_us >= ops_window.start_us && marker->start_us < ops_window.end_us) {
      op_step_spans.emplace_back(marker->start_us, marker->end_us());
    }
  }
  const double cpu_busy_ms = busy_us(op_step_spans.empty() ? training_ops : inside_steps(training_ops, op_step_spans)) / 1000.0 / op_steps;
  // The CPU share is read where the operators were recorded: busy time over those steps' length.
  const double cpu_share = ops_window.mean_step_us > 0 ? cpu_busy_ms * 1000.0 / ops_window.mean_step_us : 0.0;

  const double utilisation_raw = on_gpu ? (step_ms > 0 ? gpu_busy_ms / step_ms : 0.0) : cpu_share;
  const double busy_ms = on_gpu ? gpu_busy_ms : std::min(cpu_share, 1.0) * step_ms;
  const double host_overhead_ms = std::max(step_ms - busy_ms - dataload_ms.value_or(0.0), 0.0);
  std::optional<double> allocator_calls_per_step;
  if (runtime_events > 0) {
    allocator_calls_per_step = static_cast<double>(allocator_calls / steps);
  } else if (summary && summary->allocator_calls_per_step) {
    allocator_calls_per_step = summary->allocator_calls_per_step;
  }
  // Operators that make the host wait for the GPU (item, nonzero, ...), per step of the operator
  // window: on a GPU each drains the launch queue. Measured with an operator trace on a GPU only
  // (the CPU's own forms call some on purpose, and there they wait for nothing). Those inside the
  // steps only: an epoch's end between two steps reads on purpose (a checkpoint's weights, the
  // logged losses), and on a small dataset (coco8 at batch 4: an epoch every 2 steps) it would
  // otherwise read as the step's.
  std::optional<double> host_syncs_per_step;
  std::string host_syncs;
  nlohmann::ordered_json host_sync_ops = nullptr;
  if (on_gpu && ops_measured) {
    host_syncs_per_step = 0.0;
    host_sync_ops = nlohmann::ordered_json::object();
    std::map<std::string, std::int64_t> in_steps;
    for (const auto& read : host_reads) {
      const double start = read.second;
      const auto within = [start](const auto& span) { return start >= span.first && start < span.second; };
      if (op_step_spans.empty() || std::any_of(op_step_spans.begin(), op_step_spans.end(), within)) ++in_steps[read.first];
    }
    for (const auto& [name, count] : in_steps) {
      const double per_step = static_cast<double>(count) / op_steps;
      *host_syncs_per_step += per_step;
      host_sync_ops[name] = rounded(per_step, 2);
      host_syncs += fmt::format("{}{} {:g}/step", host_syncs.empty() ? "" : ", ", name, rounded(per_step, 2));
    }
  }
  const bool amp = summary ? summary->amp() : true;
  const Communication communication = measure_communication(collected, summary, steps, op_steps, step_ms, ops_window, op_step_spans);

  const Verdict verdict = decide_verdict({.on_gpu = on_gpu,
                                          .busy_measured = busy_measured,
                                          .busy_missing_reason = missing_reason,
                                          .dataload_fraction = dataload_fraction,
                                          .utilisation_raw = utilisation_raw,
                                          .allocator_calls_per_step = on_gpu ? allocator_calls_per_step : std::nullopt,
                                          .kernels_per_step = kernels_per_step,
                                          .mean_kernel_us = mean_kernel_us,
                                          .host_syncs_per_step = host_syncs_per_step,
                                          .host_syncs = host_syncs,
                                          .host_overhead_ms = host_overhead_ms,
                                          .amp = amp,
                                          .cpu_bf16_speedup = summary ? summary->cpu_bf16_speedup() : std::nullopt,
                                          .communication_fraction = communication.fraction,
                                          .slowest_rank_note = communication.slowest_rank_note});
  const bool memory_pressure = verdict.bound == "memory-pressure";

  const double ops_us = total_us(ops);
  std::int64_t op_count = 0;
  for (const auto& [name, t] : ops) op_count += t.count;

  PhaseTables per_phase = phase_tables(collected, summary, on_gpu, steps, op_steps);
  nlohmann::ordered_json metrics;

  nlohmann::ordered_json categories = nlohmann::ordered_json::array();
  std::vector<std::pair<std::string, double>> category_rows(category_us.begin(), category_us.end());
  std::stable_sort(category_rows.begin(), category_rows.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  for (const auto& [name, us] : category_rows) {
    categories.push_back({{"name", name}, {"pct", rounded(kernel_us > 0 ? 100 * us / kernel_us : 0.0, 2)},
                          {"ms_per_step", rounded(us / 1000.0 / steps, 4)}});
  }

  const auto gpu_value = [&](double value, int digits) {
    return kernels_measured ? nlohmann::ordered_json(rounded(value, digits)) : nlohmann::ordered_json(nullptr);
  };
  std::optional<double> images_per_second;
  if (summary) images_per_second = summary->images_per_second();
  nlohmann::ordered_json j;
  j["schema"] = kAnalysisSchema;
  j["trace"] = trace_path;
  j["model"] = summary ? summary->meta.value("model", "") : "";
  j["config"] = summary ? nlohmann::ordered_json(summary->meta) : nlohmann::ordered_json::object();
  j["device_kind"] = on_gpu ? "cuda" : "cpu";
  j["gpu_trace"] = {{"available", kernels_measured},
                    {"reason", on_gpu && !kernels_measured ? nlohmann::ordered_json(missing_reason)
                                                           : on_gpu ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json("training on the CPU")}};
  j["cpu_ops_trace"] = {{"available", ops_measured}};
  j["bound"] = verdict.bound;
  j["bound_why"] = verdict.why;
  j["levers"] = verdict.levers;
  j["step_ms"] = rounded(step_ms, 3);
  j["img_per_s"] = number_or_null(images_per_second, 2);
  j["dataload_ms"] = number_or_null(dataload_ms, 3);
  j["dataload_frac"] = number_or_null(dataload_fraction, 3);
  j["gpu_util"] = gpu_value(std::min(utilisation_raw, 1.0), 4);
  j["gpu_util_raw"] = gpu_value(utilisation_raw, 4);
  const bool cpu_busy_known = !on_gpu && ops_measured;
  j["cpu_util"] = cpu_busy_known ? nlohmann::ordered_json(rounded(std::min(utilisation_raw, 1.0), 4)) : nlohmann::ordered_json(nullptr);
  j["cpu_busy_ms_per_step"] = cpu_busy_known ? nlohmann::ordered_json(rounded(cpu_busy_ms, 3)) : nlohmann::ordered_json(nullptr);
  // the length of the steps the operators were recorded in (the synchronised half for our profiles)
  j["cpu_window_step_ms"] = cpu_busy_known ? nlohmann::ordered_json(rounded(ops_window.mean_step_us / 1000.0, 3)) : nlohmann::ordered_json(nullptr);
  j["memory_pressure"] = memory_pressure;
  j["cuda_mallocs_per_step"] = number_or_null(on_gpu ? allocator_calls_per_step : std::nullopt, 1);
  j["host_overhead_ms_per_step"] = rounded(host_overhead_ms, 3);
  j["host_syncs_per_step"] = number_or_null(host_syncs_per_step, 2);
  j["host_sync_ops"] = host_sync_ops;
  j["launches_per_step"] = gpu_value(static_cast<double>(kernels_per_step), 0);
  j["gpu_busy_ms_per_step"] = gpu_value(gpu_busy_ms, 3);
  j["mean_kernel_us"] = gpu_value(mean_kernel_us, 2);
  j["kernels_per_step"] = gpu_value(static_cast<double>(kernels_per_step), 0);
  j["unique_kernels"] = kernels.size();
  j["memcpy_ms_per_step"] = gpu_value(memcpy_us / 1000.0 / steps, 3);
  j["tensorcore_pct"] = gpu_value(kernel_us > 0 ? 100 * tensor_core_us / kernel_us : 0.0, 2);
  j["peak_vram_mb"] = number_or_null(summary ? summary->peak_vram_mb : std::nullopt, 1);
  j["window"] = {{"wall_ms", rounded(wall_ms, 3)}, {"real_steps", steps}, {"ops_steps", op_steps},
                 {"ops_window", summary && summary->ops_in_synced_half ? "synced" : "real"}};
  const nlohmann::ordered_json summary_json = summary ? summary_to_json(*summary) : nlohmann::ordered_json(nullptr);
  j["composition_ms"] = summary ? summary_json["composition_ms"] : nlohmann::ordered_json(nullptr);
  j["parts_ms"] = summary ? summary_json["parts_ms"] : nlohmann::ordered_json(nullptr);
  j["distributed"] = communication.json;

  // `profile get` names (metric <- profile.json key), in LibreYOLO's order
  static constexpr std::pair<const char*, const char*> kMetricKeys[] = {
      {"img_per_s", "img_per_s"}, {"step_ms", "step_ms"}, {"dataload_ms", "dataload_ms"}, {"dataload_frac", "dataload_frac"},
      {"gpu_util", "gpu_util"}, {"gpu_busy_ms", "gpu_busy_ms_per_step"}, {"cpu_util", "cpu_util"},
      {"cpu_busy_ms", "cpu_busy_ms_per_step"}, {"mean_kernel_us", "mean_kernel_us"}, {"kernels_per_step", "kernels_per_step"},
      {"unique_kernels", "unique_kernels"}};
  static constexpr std::pair<const char*, const char*> kMoreMetricKeys[] = {
      {"memcpy_ms", "memcpy_ms_per_step"}, {"tensorcore_pct", "tensorcore_pct"}, {"peak_vram_mb", "peak_vram_mb"},
      {"host_overhead_ms", "host_overhead_ms_per_step"}, {"launches_per_step", "launches_per_step"},
      {"cuda_mallocs_per_step", "cuda_mallocs_per_step"}, {"memory_pressure", "memory_pressure"},
      {"host_syncs_per_step", "host_syncs_per_step"}};
  for (const auto& [metric, key] : kMetricKeys) metrics[metric] = j[key];
  metrics["ops_per_step"] = op_count / op_steps;
  for (const auto& [metric, key] : kMoreMetricKeys) metrics[metric] = j[key];
  metrics["bound"] = verdict.bound;
  metrics["collective_ms"] = number_or_null(communication.ms_per_step, 3);
  metrics["collective_frac"] = number_or_null(communication.fraction, 3);
  metrics["rank_spread_pct"] = communication.json.is_object() ? communication.json["rank_spread_pct"] : nlohmann::ordered_json(nullptr);
  for (auto& [key, value] : per_phase.metrics) metrics[key] = value;
  j["metrics"] = metrics;
  j["categories"] = categories;
  j["phases"] = std::move(per_phase.rows);
  j["phases_gpu"] = std::move(per_phase.gpu);
  j["kernels_by_phase"] = std::move(per_phase.kernels);
  j["ops_by_phase"] = std::move(per_phase.ops);
  j["top_kernels"] = kernel_rows(kernels, steps, kernel_us, 8);
  j["kernels"] = kernel_rows(kernels, steps, kernel_us, kernels.size());
  j["ops"] = op_rows(ops, op_steps, ops_us, ops.size());
  return j;
}

}  // namespace libreyolo::profile
