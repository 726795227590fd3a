#include "profile/artifacts.h"

#include "core/atomic_file.h"
#include "core/log.h"
#include "profile/analysis.h"
#include "profile/report.h"
#include "profile/timeline.h"

#include <fmt/core.h>

namespace libreyolo::profile {

namespace fs = std::filesystem;

ProfileResult write_artifacts(const fs::path& run_dir, StepSummary summary, const Trace* trace, bool quiet) {
  fs::create_directories(run_dir);
  const fs::path trace_path = run_dir / "profile_trace.json", summary_path = run_dir / "profile_summary.json",
                 profile_path = run_dir / "profile.json", timeline_path = run_dir / "timeline.html";
  if (trace) {
    write_trace(trace_path, *trace);
    summary.trace = trace_path.string();
  }
  const nlohmann::ordered_json analysis = analyze(trace ? *trace : Trace{}, summary, trace ? trace_path.string() : "");
  nlohmann::ordered_json summary_json = summary_to_json(summary);
  summary_json["bound"] = analysis["bound"];
  summary_json["bound_why"] = analysis["bound_why"];
  write_file_atomically(summary_path, summary_json.dump(2));
  if (trace) write_timeline(timeline_path, *trace, analysis);
  write_file_atomically(profile_path, analysis.dump(2));
  const std::string report = format_report(analysis, trace ? timeline_path.string() : "", trace_path.string());
  if (!quiet) fmt::print(stderr, "{}", report);
  log::to_file(report);
  return {.profile_json = profile_path,
          .bound = analysis["bound"].get<std::string>(),
          .images_per_second = analysis["img_per_s"].is_number() ? analysis["img_per_s"].get<double>() : 0.0};
}

}  // namespace libreyolo::profile
