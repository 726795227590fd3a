// From a trace (and, when there is one, the step summary beside it) to profile.json: the window
// of real steps, GPU or CPU utilisation, kernel and operator tables per phase, and the verdict.
#pragma once

#include "profile/summary.h"
#include "profile/trace.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <optional>
#include <string>

namespace libreyolo::profile {

inline constexpr const char* kAnalysisSchema = "libreyolo.profile.analysis/v1";

// The steps the trace analysis measures: ProfilerStep markers 2..8 (skipping two cold steps),
// kept inside the unsynchronised half when the summary says how long that was.
struct AnalysisWindow {
  double start_us = 0;
  double end_us = 0;
  int steps = 1;
  double mean_step_us = 0;  // mean ProfilerStep length inside the window (wall / steps without markers)
};
AnalysisWindow pick_window(const Trace& trace, const std::optional<StepSummary>& summary);
// Where the CPU operators were recorded: the synchronised half when the summary says so (our
// profiler keeps operator recording out of the real-time half), else the window above.
AnalysisWindow pick_ops_window(const Trace& trace, const std::optional<StepSummary>& summary);

nlohmann::ordered_json analyze(const Trace& trace, const std::optional<StepSummary>& summary, const std::string& trace_path);

// profile.json as written, or a raw trace (ours or torch.profiler's) analysed on the spot, with
// its sibling profile_summary.json when there is one. Throws UsageError (exit 2) for a bad file.
// `path`: profile.json, a raw trace, or a run folder holding either.
nlohmann::ordered_json load_profile(const std::filesystem::path& path);

}  // namespace libreyolo::profile
