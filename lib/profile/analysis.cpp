#include "profile/analysis.h"

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

namespace {

nlohmann::ordered_json number_or_null(const std::optional<double>& value, int digits) {
  return value && std::isfinite(*value) ? nlohmann::ordered_json(rounded(*value, digits)) : nlohmann::ordered_json(nullptr);
}

struct PhaseSpan {
  double start_us, end_us;
  std::string phase;
  std::int64_t pid, tid;
};

// Which phase was running on a thread at a time: the CPU spans step/<phase>. Kernels are placed
// by the time of their launch on the CPU, not by their GPU time (GPU spans overlap and mislead).
class PhaseIndex {
 public:
  explicit PhaseIndex(const Trace& trace) {
    for (const auto& e : trace.events) {
      if (e.category != category::annotation) continue;
      if (auto phase = phase_of_annotation(e.name); !phase.empty()) spans_.push_back({e.start_us, e.end_us(), phase, e.pid, e.tid});
    }
    std::sort(spans_.begin(), spans_.end(), [](const auto& a, const auto& b) { return a.start_us < b.start_us; });
    for (const auto& s : spans_) longest_us_ = std::max(longest_us_, s.end_us - s.start_us);
  }
  std::string at(double time_us, std::int64_t pid, std::int64_t tid, bool same_thread) const {
    auto it = std::upper_bound(spans_.begin(), spans_.end(), time_us, [](double t, const auto& s) { return t < s.start_us; });
    while (it != spans_.begin()) {
      --it;
      if (it->end_us <= time_us) {
        if (time_us - it->start_us > longest_us_) break;  // no earlier span reaches this far
        continue;
      }
      if (!same_thread || (it->pid == pid && it->tid == tid)) return it->phase;
    }
    return "unphased";
  }
  const std::vector<PhaseSpan>& spans() const { return spans_; }

 private:
  std::vector<PhaseSpan> spans_;
  double longest_us_ = 0;
};

struct Totals {
  double duration_us = 0;
  std::int64_t count = 0;
};

using Table = std::map<std::string, Totals>;

std::vector<std::pair<std::string, Totals>> by_time(const Table& table) {
  std::vector<std::pair<std::string, Totals>> rows(table.begin(), table.end());
  std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.duration_us > b.second.duration_us; });
  return rows;
}

double total_us(const Table& table) {
  double sum = 0;
  for (const auto& [name, t] : table) sum += t.duration_us;
  return sum;
}

nlohmann::ordered_json kernel_rows(const Table& table, int steps, double all_kernels_us, std::size_t limit) {
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const auto& [name, t] : by_time(table)) {
    if (rows.size() >= limit) break;
    rows.push_back({{"kernel", friendly_kernel_name(name)},
                    {"raw_name", name.substr(0, 90)},
                    {"category", kernel_category(name)},
                    {"tensorcore", is_tensor_core_kernel(name)},
                    {"ms_per_step", rounded(t.duration_us / 1000.0 / steps, 4)},
                    {"pct_of_gpu", rounded(all_kernels_us > 0 ? 100 * t.duration_us / all_kernels_us : 0.0, 2)},
                    {"count_per_step", std::max<std::int64_t>(t.count / steps, 1)}});
  }
  return rows;
}

nlohmann::ordered_json op_rows(const Table& table, int steps, double all_ops_us, std::size_t limit) {
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const auto& [name, t] : by_time(table)) {
    if (rows.size() >= limit) break;
    rows.push_back({{"op", name.substr(0, 70)},
                    {"ms_per_step", rounded(t.duration_us / 1000.0 / steps, 4)},
                    {"pct_of_cpu_ops", rounded(all_ops_us > 0 ? 100 * t.duration_us / all_ops_us : 0.0, 2)},
                    {"count_per_step", std::max<std::int64_t>(t.count / steps, 1)}});
  }
  return rows;
}

// Time covered by at least one operator on the given threads (nested operators count once).
double busy_us(std::vector<std::pair<double, double>> intervals) {
  std::sort(intervals.begin(), intervals.end());
  double busy = 0, start = 0, end = -1;
  for (const auto& [s, e] : intervals) {
    if (s > end) {
      if (end > start) busy += end - start;
      start = s, end = e;
    } else {
      end = std::max(end, e);
    }
  }
  if (end > start) busy += end - start;
  return busy;
}

std::vector<std::string> ordered_phases(const std::set<std::string>& present) {
  std::vector<std::string> phases;
  for (const char* p : kPhaseOrder) {
    if (present.contains(p)) phases.emplace_back(p);
  }
  for (const auto& p : present) {
    if (std::find(phases.begin(), phases.end(), p) == phases.end()) phases.push_back(p);
  }
  return phases;
}

}  // namespace

namespace {

std::vector<const Event*> step_markers(const Trace& trace) {
  std::vector<const Event*> steps;
  for (const auto& e : trace.events) {
    if (profiler_step_number(e.name) >= 0) steps.push_back(&e);
  }
  std::stable_sort(steps.begin(), steps.end(), [](const Event* a, const Event* b) { return a->start_us < b->start_us; });
  return steps;
}

// The distinct steps starting in the window, and their mean length.
void count_steps(AnalysisWindow& window, const std::vector<const Event*>& steps) {
  std::set<std::int64_t> numbers;
  double total = 0;
  for (const Event* e : steps) {
    if (e->start_us >= window.start_us && e->start_us < window.end_us && numbers.insert(profiler_step_number(e->name)).second) {
      total += e->duration_us;
    }
  }
  window.steps = std::max<int>(1, static_cast<int>(numbers.size()));
  window.mean_step_us = numbers.empty() ? (window.end_us - window.start_us) : total / static_cast<double>(numbers.size());
}

// Everything the analysis needs from the events, in one pass: kernel and operator tables (all
// and per phase), kernel categories, memcpy and allocator figures, operator intervals per thread.
struct Collected {
  Table kernels, ops;
  std::map<std::string, Table> kernels_by_phase, ops_by_phase;
  std::set<std::string> present;  // phases seen
  std::int64_t kernels_in_trace = 0, allocator_calls = 0, runtime_events = 0;
  double memcpy_us = 0, tensor_core_us = 0;
  std::map<std::string, double> category_us;
  std::map<std::pair<std::int64_t, std::int64_t>, std::vector<std::pair<double, double>>> op_intervals;
  std::map<std::string, double> span_us;
  std::set<std::pair<std::int64_t, std::int64_t>> training_threads;  // those running step/forward
  // Data-parallel collectives: Gloo's own records on its worker threads and c10d's dispatcher ops
  // (CPU operators, RecordFunction), and NCCL kernels on the GPU (CUPTI).
  std::vector<std::pair<double, double>> collective_ops, collective_kernels;
  // Operators that make the host wait for the GPU (item, nonzero, ...): name and start.
  std::vector<std::pair<std::string, double>> host_reads;
};

bool is_collective_op(const std::string& name) { return name.starts_with("gloo:") || name.starts_with("c10d::"); }

bool is_collective_kernel(const std::string& name) {
  return name.find("nccl") != std::string::npos || name.find("NCCL") != std::string::npos;
}

Collected collect_events(const Trace& trace, const AnalysisWindow& window, const AnalysisWindow& ops_window) {
  const auto inside = [&](const Event& e) {
    const AnalysisWindow& w = e.category == category::cpu_op ? ops_window : window;
    return e.start_us >= w.start_us && e.start_us < w.end_us;
  };
  const PhaseIndex phases(trace);
  Collected c;
  auto& [kernels, ops, kernels_by_phase, ops_by_phase, present, kernels_in_trace, allocator_calls, runtime_events, memcpy_us,
         tensor_core_us, category_us, op_intervals, span_us, training_threads, collective_ops, collective_kernels, host_reads] = c;
  const auto launches = launches_by_correlation(trace.events);
  for (const auto& s : phases.spans()) {
    if (s.phase == "forward") training_threads.insert({s.pid, s.tid});
  }

  for (const auto& e : trace.events) {
    if (e.category == category::kernel) ++kernels_in_trace;
    if (e.category == category::runtime) ++runtime_events;
    if (!inside(e)) continue;
    if (e.category == category::kernel) {
      const auto launch = launches.find(e.correlation);
      const std::string phase = launch != launches.end() ? phases.at(launch->second->start_us, 0, 0, false)
                                                         : phases.at(e.start_us, 0, 0, false);
      for (Table* table : {&kernels, &kernels_by_phase[phase]}) {
        (*table)[e.name].duration_us += e.duration_us;
        ++(*table)[e.name].count;
      }
      present.insert(phase);
      category_us[kernel_category(e.name)] += e.duration_us;
      if (is_tensor_core_kernel(e.name)) tensor_core_us += e.duration_us;
      if (is_collective_kernel(e.name)) collective_kernels.emplace_back(e.start_us, e.end_us());
    } else if (e.category == category::memcpy || e.category == category::memset) {
      memcpy_us += e.duration_us;
    } else if (e.category == category::runtime) {
      if (e.name.find("Malloc") != std::string::npos || e.name.find("Free") != std::string::npos) ++allocator_calls;
    } else if (e.category == category::cpu_op) {
      const std::string phase = phases.at(e.start_us, e.pid, e.tid, true);
      for (Table* table : {&ops, &ops_by_phase[phase]}) {
        (*table)[e.name].duration_us += e.duration_us;
        ++(*table)[e.name].count;
      }
      present.insert(phase);
      op_intervals[{e.pid, e.tid}].emplace_back(e.start_us, e.end_us());
      if (is_collective_op(e.name)) collective_ops.emplace_back(e.start_us, e.end_us());
      if (train::is_host_read_operator(e.name)) host_reads.emplace_back(e.name, e.start_us);
    } else if (e.category == category::annotation) {
      if (auto phase = phase_of_annotation(e.name); !phase.empty()) {
        span_us[phase] += e.duration_us;
        present.insert(phase);
      }
    }
  }

  return c;
}

// Per phase: GPU and wall time, kernels and operators per step, and the kernel/operator tables.
struct PhaseTables {
  nlohmann::ordered_json rows = nlohmann::ordered_json::array(), gpu = nlohmann::ordered_json::array();
  nlohmann::ordered_json kernels = nlohmann::ordered_json::object(), ops = nlohmann::ordered_json::object();
  std::map<std::string, nlohmann::ordered_json> metrics;  // {phase}_gpu_ms, _wall_ms, _kernels, _ops
};

PhaseTables phase_tables(Collected& c, const std::optional<StepSummary>& summary, bool on_gpu, int steps, int op_steps) {
  if (summary) {
    for (const auto& [phase, ms] : summary->composition_ms) c.present.insert(phase);
    c.present.insert("dataload");
  }
  PhaseTables out;
  const double kernel_us = total_us(c.kernels), ops_us = total_us(c.ops);
  for (const auto& phase : ordered_phases(c.present)) {
    const Table& phase_kernels = c.kernels_by_phase[phase];
    const Table& phase_ops = c.ops_by_phase[phase];
    std::int64_t k = 0, o = 0;
    for (const auto& [n, t] : phase_kernels) k += t.count;
    for (const auto& [n, t] : phase_ops) o += t.count;
    std::optional<double> wall;
    if (summary && phase == "dataload") {
      wall = summary->dataload_ms;
    } else if (summary && summary->composition_ms.contains(phase)) {
      wall = summary->composition_ms.at(phase);
    } else if (!summary && c.span_us.contains(phase)) {
      wall = c.span_us[phase] / 1000.0 / steps;
    }
    std::optional<double> gpu_ms;
    if (on_gpu) gpu_ms = total_us(phase_kernels) / 1000.0 / steps;
    out.rows.push_back({{"phase", phase},
                          {"gpu_ms_per_step", number_or_null(gpu_ms, 3)},
                          {"wall_ms_per_step", number_or_null(wall, 3)},
                          {"kernels_per_step", k / steps},
                          {"ops_per_step", o / op_steps},
                          {"unique_kernels", phase_kernels.size()}});
    out.gpu.push_back({{"phase", phase}, {"gpu_ms_per_step", number_or_null(gpu_ms, 3)}});
    out.kernels[phase] = kernel_rows(phase_kernels, steps, kernel_us, 40);
    out.ops[phase] = op_rows(phase_ops, op_steps, ops_us, 40);
    out.metrics[phase + "_gpu_ms"] = number_or_null(gpu_ms, 3);
    out.metrics[phase + "_wall_ms"] = number_or_null(wall, 3);
    out.metrics[phase + "_kernels"] = k / steps;
    out.metrics[phase + "_ops"] = o / op_steps;
  }

  return out;
}

// The data-parallel view: every rank's step time (gathered by the step profiler), the slowest and
// fastest rank, and the time collectives were in flight per step, from this rank's trace.
struct Communication {
  std::optional<double> ms_per_step, fraction;
  std::string slowest_rank_note;  // set when the ranks' step times differ by 10% or more
  nlohmann::ordered_json json = nullptr;
};

// The parts of `intervals` inside the steps (collectives between steps, such as the BatchNorm
// averaging at an epoch's end, are not the step's).
std::vector<std::pair<double, double>> inside_steps(const std::vector<std::pair<double, double>>& intervals,
                                                    const std::vector<std::pair<double, double>>& steps) {
  std::vector<std::pair<double, double>> clipped;
  for (const auto& [start, end] : intervals) {
    for (const auto& [step_start, step_end] : steps) {
      const double s = std::max(start, step_start), e = std::min(end, step_end);
      if (e > s) clipped.emplace_back(s, e);
    }
  }
  return clipped;
}

Communication measure_communication(const Collected& c, const std::optional<StepSummary>& summary, int steps, int op_steps,
                                    double step_ms, const AnalysisWindow& ops_window,
                                    const std::vector<std::pair<double, double>>& op_step_spans) {
  Communication out;
  const bool ranked = summary && summary->ranks.size() > 1;
  if (!ranked && c.collective_ops.empty() && c.collective_kernels.empty()) return out;
  // Gloo's spans are read inside the steps the operators were recorded in, NCCL kernels over the window.
  const double cpu_ms = busy_us(op_step_spans.empty() ? c.collective_ops : inside_steps(c.collective_ops, op_step_spans)) / 1000.0 / op_steps;
  const double gpu_ms = busy_us(c.collective_kernels) / 1000.0 / steps;
  const double ops_step_ms = ops_window.mean_step_us > 0 ? ops_window.mean_step_us / 1000.0 : step_ms;
  const bool measured = !c.collective_ops.empty() || !c.collective_kernels.empty();
  if (measured) {
    out.ms_per_step = cpu_ms + gpu_ms;
    out.fraction = (ops_step_ms > 0 ? cpu_ms / ops_step_ms : 0.0) + (step_ms > 0 ? gpu_ms / step_ms : 0.0);
  }
  nlohmann::ordered_json j;
  j["world_size"] = ranked ? summary->ranks.size() : 1;
  nlohmann::ordered_json ranks = nlohmann::ordered_json::array();
  if (ranked) {
    const auto& r = summary->ranks;
    const auto [fastest, slowest] = std::minmax_element(r.begin(), r.end(), [](const auto& a, const auto& b) { return a.step_ms < b.step_ms; });
    for (const auto& rank : r) {
      ranks.push_back({{"rank", rank.rank}, {"step_ms", rounded(rank.step_ms, 3)}, {"dataload_ms", rounded(rank.dataload_ms, 3)}});
    }
    const double spread = fastest->step_ms > 0 ? 100 * (slowest->step_ms - fastest->step_ms) / fastest->step_ms : 0.0;
    j["slowest_rank"] = {{"rank", slowest->rank}, {"step_ms", rounded(slowest->step_ms, 3)}};
    j["fastest_rank"] = {{"rank", fastest->rank}, {"step_ms", rounded(fastest->step_ms, 3)}};
    j["rank_spread_pct"] = rounded(spread, 2);
    if (spread >= 10) {
      out.slowest_rank_note = fmt::format("rank {} is the slowest ({:.1f} ms/step, {:.0f}% over rank {}): the others wait for it in "
                                          "every collective", slowest->rank, slowest->step_ms, spread, fastest->rank);
    }
  } else {
    j["slowest_rank"] = nullptr, j["fastest_rank"] = nullptr, j["rank_spread_pct"] = nullptr;
  }
  j["ranks"] = ranks;
  j["collective_ms_per_step"] = number_or_null(out.ms_per_step, 3);
  j["collective_frac"] = number_or_null(out.fraction, 3);
  j["collective_cpu_ms_per_step"] = c.collective_ops.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(rounded(cpu_ms, 3));
  j["collective_gpu_ms_per_step"] = c.collective_kernels.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(rounded(gpu_ms, 3));
  j["collectives_from"] = measured ? (c.collective_kernels.empty() ? "Gloo and c10d operators (RecordFunction)"
                                                                   : "NCCL kernels (CUPTI) and Gloo operators (RecordFunction)")
                                   : "not measured (no operator or kernel trace)";
  out.json = std::move(j);
  return out;
}

}  // namespace

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

namespace {

// A profile.json is checked before any command reads it: the schema this build writes, each key
// the commands use with its type, and every number a measurement (finite, not negative). Row
// tables hold names (strings), flags (booleans) and measurements.
void check_profile(const nlohmann::ordered_json& p, const std::filesystem::path& path) {
  const auto refuse = [&](const std::string& what) {
    throw UsageError(fmt::format("{}: {}; this is not a profile.json of this libreyolo (schema {}): re-run `libreyolo "
                                 "profile run` or train with profile=true",
                                 path.string(), what, kAnalysisSchema));
  };
  if (p["schema"] != kAnalysisSchema) refuse(fmt::format("schema {} is not one this build reads", p["schema"].dump()));
  const auto check_number = [&](const nlohmann::ordered_json& value, const std::string& where) {
    if (value.is_number() && (!std::isfinite(value.get<double>()) || value.get<double>() < 0 || value.get<double>() > 1e15)) {
      refuse(fmt::format("{} is {}, not a measurement", where, value.dump()));
    }
  };
  const auto check_scalar = [&](const nlohmann::ordered_json& value, const std::string& where) {
    if (value.is_structured()) refuse(fmt::format("{} is {}, where a value belongs", where, value.dump().substr(0, 40)));
    check_number(value, where);
  };
  const auto check_rows = [&](const nlohmann::ordered_json& rows, const std::string& where) {
    if (!rows.is_array()) refuse(fmt::format("\"{}\" is not a list", where));
    for (std::size_t i = 0; i < rows.size(); ++i) {
      if (!rows[i].is_object()) refuse(fmt::format("{}[{}] is not an object", where, i));
      for (const auto& [key, value] : rows[i].items()) {
        const std::string at = fmt::format("{}[{}].{}", where, i, key);
        static const std::set<std::string> kNames{"phase", "kernel", "raw_name", "category", "op", "name"};
        if (kNames.count(key) && !value.is_string()) refuse(fmt::format("{} is {}, not a name", at, value.dump()));
        if (key == "tensorcore" && !value.is_boolean()) refuse(fmt::format("{} is {}, not true or false", at, value.dump()));
        if (!kNames.count(key) && key != "tensorcore" && !value.is_number() && !value.is_null()) {
          refuse(fmt::format("{} is {}, not a number", at, value.dump().substr(0, 40)));
        }
        check_number(value, at);
      }
    }
  };
  for (const char* key : {"model", "device_kind", "bound", "bound_why", "levers"}) {
    if (!p.contains(key) || !p[key].is_string()) refuse(fmt::format("\"{}\" is missing or not a string", key));
  }
  for (const char* key : {"metrics", "gpu_trace", "config", "kernels_by_phase", "ops_by_phase"}) {
    if (!p.contains(key) || !p[key].is_object()) refuse(fmt::format("\"{}\" is missing or not an object", key));
  }
  for (const char* key : {"categories", "phases", "top_kernels", "kernels", "ops"}) {
    if (!p.contains(key)) refuse(fmt::format("\"{}\" is missing", key));
    check_rows(p[key], key);
  }
  for (const char* key : {"kernels_by_phase", "ops_by_phase"}) {
    for (const auto& [phase, rows] : p[key].items()) check_rows(rows, fmt::format("{}.{}", key, phase));
  }
  // the measurements are numbers (or null where not measured); only these fields are text
  static const std::set<std::string> kTextFields{"schema", "trace", "model", "device_kind", "bound", "bound_why", "levers"};
  for (const auto& [key, value] : p.items()) {
    if (value.is_structured()) continue;
    if (value.is_string() && !kTextFields.count(key)) refuse(fmt::format("\"{}\" is {}, not a number", key, value.dump().substr(0, 40)));
    check_scalar(value, fmt::format("\"{}\"", key));
  }
  if (p.contains("trace") && !p["trace"].is_string() && !p["trace"].is_null()) {
    refuse(fmt::format("\"trace\" is {}, not the path of a trace file", p["trace"].dump().substr(0, 40)));
  }
  for (const auto& [key, value] : p["metrics"].items()) check_scalar(value, fmt::format("metrics.{}", key));
  for (const auto& [key, value] : p["gpu_trace"].items()) check_scalar(value, fmt::format("gpu_trace.{}", key));
  for (const auto& [key, value] : p["config"].items()) {
    if (value.is_structured()) refuse(fmt::format("config.{} is not a value", key));
  }
  if (p.contains("window") && !p["window"].is_object() && !p["window"].is_null()) refuse("\"window\" is not an object");
  if (p.contains("composition_ms") && !p["composition_ms"].is_null()) {
    if (!p["composition_ms"].is_object()) refuse("\"composition_ms\" is not an object");
    for (const auto& [key, value] : p["composition_ms"].items()) {
      if (!value.is_number()) refuse(fmt::format("composition_ms.{} is not a number", key));
      check_number(value, "composition_ms." + key);
    }
  }
}

}  // namespace

nlohmann::ordered_json load_profile(const std::filesystem::path& given) {
  // A run folder stands for its profile.json (or, without one, its raw trace).
  std::filesystem::path path = given;
  std::error_code error;  // a path that cannot be looked at is reported by the read below
  if (std::filesystem::is_directory(given, error)) {
    path = given / "profile.json";
    if (!std::filesystem::exists(path, error)) path = given / "profile_trace.json";
    if (!std::filesystem::exists(path, error)) {
      throw UsageError(fmt::format("{}: a folder without profile.json or profile_trace.json; give a run folder "
                                   "trained with profile=true, or the path of a profile file", given.string()));
    }
  }
  const std::string text = read_file_text(path);
  const auto document = parse_json_text<nlohmann::json>(text, path);
  if (document.is_object() && document.contains("schema") && !document.contains("traceEvents")) {
    auto profile = parse_json_text<nlohmann::ordered_json>(text, path);  // keeps the file's key order
    check_profile(profile, path);
    return profile;
  }
  const Trace trace = parse_trace(document, path.string());
  std::optional<StepSummary> summary;
  const auto sibling = path.parent_path() / "profile_summary.json";
  if (std::filesystem::exists(sibling, error)) {
    try {
      summary = summary_from_json(parse_json_text<nlohmann::json>(read_file_text(sibling), sibling), sibling.string());
    } catch (const nlohmann::json::exception& error) {
      throw UsageError(fmt::format("{}: not a valid profile summary ({})", sibling.string(), error.what()));
    }
  }
  return analyze(trace, summary, path.string());
}

}  // namespace libreyolo::profile
