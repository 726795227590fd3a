#include "core/step_part.h"
#include "profile/report.h"
#include "profile/step_profiler.h"

#include <ATen/ATen.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <string_view>
#include <thread>

#include "catch.h"  // last: see catch.h

using namespace libreyolo::profile;
namespace fs = std::filesystem;

namespace {

// One fake training step: a fetch, the four phases with a little real work, end_step().
bool fake_step(StepProfiler& profiler, std::chrono::milliseconds compute = {}) {
  profiler.before_fetch();
  profiler.after_fetch(true);
  for (const char* name : {"to_device", "forward", "backward", "optimizer"}) {
    const auto phase = scoped_phase(&profiler, name);
    (void)at::matmul(at::ones({32, 32}), at::ones({32, 32})).sum();
    if (std::string_view(name) == "forward") std::this_thread::sleep_for(compute);
  }
  return profiler.end_step();
}

}  // namespace

TEST_CASE("step window: warmup dropped, halves, accumulation rounding, artifacts", "[profile]") {
  const fs::path dir = fs::temp_directory_path() / ("libreyolo_step_profiler_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  StepProfiler profiler({.warmup = 3, .steps = 5, .accumulate = 2, .trace = true, .quiet = true,
                         .meta = {{"model", "test"}, {"device", "cpu"}, {"batch", 4}}, .run_dir = dir});
  // rounded up to whole accumulation windows: warmup 4, steps 6 (3 unsynchronised + 3 synchronised)
  CHECK(profiler.options().warmup == 4);
  CHECK(profiler.options().steps == 6);
  int steps = 0;
  bool closed = false;
  while (!closed && steps < 100) {
    // the fetch that ends an epoch is not a step
    if (steps == 5) {
      profiler.before_fetch();
      profiler.after_fetch(false);
    }
    closed = fake_step(profiler);
    ++steps;
    CHECK(profiler.active() == (!closed && steps >= 4));
  }
  CHECK(steps == 10);
  CHECK_FALSE(fake_step(profiler));  // after the window: nothing more
  REQUIRE(profiler.result());
  for (const char* file : {"profile.json", "profile_summary.json", "profile_trace.json", "timeline.html"}) {
    CHECK(fs::file_size(dir / file) > 0);
  }
  std::ifstream in(dir / "profile_summary.json");
  const auto summary = nlohmann::json::parse(in);
  CHECK(summary["window"]["warmup"] == 4);
  CHECK(summary["window"]["real_steps"] == 3);
  CHECK(summary["window"]["synced_steps"] == 3);
  CHECK(summary["real"]["step_ms"].get<double>() > 0);
  CHECK(summary["composition_ms"]["forward"].get<double>() > 0);
  CHECK(summary["device_kind"] == "cpu");
  std::ifstream trace_in(dir / "profile_trace.json");
  const auto trace = nlohmann::json::parse(trace_in);
  int step_markers = 0, matmuls = 0;
  for (const auto& e : trace["traceEvents"]) {
    const std::string name = e.value("name", "");
    step_markers += name.rfind("ProfilerStep#", 0) == 0;
    matmuls += name == "aten::matmul";
  }
  CHECK(step_markers == 6);
  CHECK(matmuls == 3 * 4);  // recorded in the synchronised half only, so the real step time stays clean
  std::ifstream profile_in(dir / "profile.json");
  const auto p = nlohmann::json::parse(profile_in);
  CHECK(p["window"]["ops_window"] == "synced");
  CHECK(p["window"]["ops_steps"] == 3);
  CHECK(p["cpu_util"].get<double>() > 0);
  CHECK(p["cpu_util"].get<double>() <= 1);
  CHECK(p["metrics"]["forward_ops"].get<int>() >= 1);
  fs::remove_all(dir);
}

TEST_CASE("profile_trace=false: no trace, no CPU verdict drawn from it", "[profile]") {
  const fs::path dir = fs::temp_directory_path() / ("libreyolo_step_profiler_nt_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  StepProfiler profiler({.warmup = 0, .steps = 2, .trace = false, .quiet = true, .meta = {{"batch", 1}}, .run_dir = dir});
  // Steps of 30 ms: a fetch of two calls stays a negligible share of them even when the test is
  // preempted (with microsecond steps, one preemption in the fetch read as a dataloader verdict).
  while (!fake_step(profiler, std::chrono::milliseconds(30))) {
  }
  CHECK_FALSE(fs::exists(dir / "profile_trace.json"));
  CHECK_FALSE(fs::exists(dir / "timeline.html"));
  std::ifstream in(dir / "profile.json");
  const auto p = nlohmann::json::parse(in);
  CHECK(p["bound"] == "unknown");
  CHECK(p["bound_why"].get<std::string>().find("profile_trace=false") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("parts a family marks are phases nested in the step's: profile.json, summary, phases table", "[profile]") {
  const fs::path dir = fs::temp_directory_path() / ("libreyolo_step_parts_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  {
    const libreyolo::StepPart outside("before");  // no profiler listening yet: nothing recorded
  }
  StepProfiler profiler({.warmup = 1, .steps = 4, .trace = true, .quiet = true,
                         .meta = {{"model", "test"}, {"device", "cpu"}, {"batch", 2}}, .run_dir = dir});
  bool closed = false;
  while (!closed) {
    profiler.before_fetch();
    profiler.after_fetch(true);
    for (const char* name : {"to_device", "forward", "backward", "optimizer"}) {
      const auto phase = scoped_phase(&profiler, name);
      if (std::string(name) == "forward") {
        const libreyolo::StepPart loss("loss");
        {
          const libreyolo::StepPart matcher("matcher");  // nested: counted in both
          (void)at::matmul(at::ones({64, 64}), at::ones({64, 64})).sum();
        }
        (void)at::matmul(at::ones({32, 32}), at::ones({32, 32})).sum();
      }
    }
    closed = profiler.end_step();
  }
  std::ifstream in(dir / "profile.json");
  const auto p = nlohmann::ordered_json::parse(in);
  REQUIRE(p["parts_ms"].is_object());
  CHECK(p["parts_ms"].size() == 2);
  const double loss = p["parts_ms"]["forward/loss"].get<double>(), matcher = p["parts_ms"]["forward/matcher"].get<double>();
  CHECK(matcher > 0);
  CHECK(loss >= matcher);
  CHECK(p["composition_ms"]["forward"].get<double>() >= loss);
  CHECK_FALSE(p["composition_ms"].contains("forward/loss"));  // the four phases still add up to the step
  std::set<std::string> phases;
  for (const auto& row : p["phases"]) phases.insert(row.value("phase", ""));
  CHECK(phases.count("forward/matcher") == 1);
  CHECK(phases.count("forward/loss") == 1);
  CHECK_FALSE(phases.count("unphased/before"));
  const std::string text = libreyolo::profile::format_report(p, "", "");
  CHECK(text.find("within forward: loss") != std::string::npos);
  fs::remove_all(dir);
}
