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

namespace libreyolo::profile::parts {

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

}  // namespace libreyolo::profile::parts
