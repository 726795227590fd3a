#include "profile/artifacts.h"

#include "core/atomic_file.h"
#include "core/log.h"
#include "profile/analysis.h"
#include "profile/report.h"
#include "profile/timeline.h"

#include <fmt/core.h>
#include <spawn.h>

#include <cstdlib>

namespace libreyolo::profile {

namespace fs = std::filesystem;

namespace {

void open_in_browser(const fs::path& page) {
  if (!std::getenv("DISPLAY") && !std::getenv("WAYLAND_DISPLAY")) return;
  const std::string url = "file://" + fs::absolute(page).string();
  char* const argv[] = {const_cast<char*>("xdg-open"), const_cast<char*>(url.c_str()), nullptr};
  pid_t pid = 0;
  if (posix_spawnp(&pid, "xdg-open", nullptr, nullptr, argv, environ) != 0) {
    log::info("Profiler: could not run xdg-open; open {} yourself", url);
  }
}

}  // namespace

ProfileResult write_artifacts(const fs::path& run_dir, StepSummary summary, const Trace* trace, bool quiet, bool open) {
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
  if (open && trace) open_in_browser(timeline_path);
  return {.profile_json = profile_path,
          .bound = analysis["bound"].get<std::string>(),
          .images_per_second = analysis["img_per_s"].is_number() ? analysis["img_per_s"].get<double>() : 0.0};
}

}  // namespace libreyolo::profile
