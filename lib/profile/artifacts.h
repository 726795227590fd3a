// The profiler's files in the run folder: profile_trace.json (Chrome trace for Perfetto),
// profile_summary.json, profile.json (libreyolo.profile.analysis/v1) and timeline.html, plus the
// console report.
#pragma once

#include "profile/step_profiler.h"
#include "profile/summary.h"
#include "profile/trace.h"

#include <filesystem>

namespace libreyolo::profile {

// `trace` may be null (profile_trace=false): then only the summary and profile.json are written.
// `open`: hand timeline.html to xdg-open when $DISPLAY or $WAYLAND_DISPLAY says there is a screen.
ProfileResult write_artifacts(const std::filesystem::path& run_dir, StepSummary summary, const Trace* trace, bool quiet,
                              bool open = false);

}  // namespace libreyolo::profile
