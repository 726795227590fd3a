// The analysis's parts (profile/analysis.cpp): kernel and operator tables, the steps in a window,
// one pass over the trace's events, the per-phase tables and the data-parallel communication
// view. Internal to lib/profile.
#pragma once

#include "profile/analysis.h"
#include "profile/summary.h"
#include "profile/trace.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace libreyolo::profile::parts {

struct Totals {
  double duration_us = 0;
  std::int64_t count = 0;
};

using Table = std::map<std::string, Totals>;

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

// Per phase: GPU and wall time, kernels and operators per step, and the kernel/operator tables.
struct PhaseTables {
  nlohmann::ordered_json rows = nlohmann::ordered_json::array(), gpu = nlohmann::ordered_json::array();
  nlohmann::ordered_json kernels = nlohmann::ordered_json::object(), ops = nlohmann::ordered_json::object();
  std::map<std::string, nlohmann::ordered_json> metrics;  // {phase}_gpu_ms, _wall_ms, _kernels, _ops
};

// The data-parallel view: every rank's step time (gathered by the step profiler), the slowest and
// fastest rank, and the time collectives were in flight per step, from this rank's trace.
struct Communication {
  std::optional<double> ms_per_step, fraction;
  std::string slowest_rank_note;  // set when the ranks' step times differ by 10% or more
  nlohmann::ordered_json json = nullptr;
};

nlohmann::ordered_json number_or_null(const std::optional<double>& value, int digits);

double total_us(const Table& table);

nlohmann::ordered_json kernel_rows(const Table& table, int steps, double all_kernels_us, std::size_t limit);

nlohmann::ordered_json op_rows(const Table& table, int steps, double all_ops_us, std::size_t limit);

// Time covered by at least one operator on the given threads (nested operators count once).
double busy_us(std::vector<std::pair<double, double>> intervals);

std::vector<const Event*> step_markers(const Trace& trace);

// The distinct steps starting in the window, and their mean length.
void count_steps(AnalysisWindow& window, const std::vector<const Event*>& steps);

Collected collect_events(const Trace& trace, const AnalysisWindow& window, const AnalysisWindow& ops_window);

PhaseTables phase_tables(Collected& c, const std::optional<StepSummary>& summary, bool on_gpu, int steps, int op_steps);

// averaging at an epoch's end, are not the step's).
std::vector<std::pair<double, double>> inside_steps(const std::vector<std::pair<double, double>>& intervals,
                                                    const std::vector<std::pair<double, double>>& steps);

Communication measure_communication(const Collected& c, const std::optional<StepSummary>& summary, int steps, int op_steps,
                                    double step_ms, const AnalysisWindow& ops_window,
                                    const std::vector<std::pair<double, double>>& op_step_spans);

}  // namespace libreyolo::profile::parts
