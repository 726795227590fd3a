#include "core/error.h"
#include "profile/timeline.h"
#include "profile/trace.h"
#include "profile/trials.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "catch.h"  // last: see catch.h

using namespace libreyolo::profile;

TEST_CASE("repeat aggregate: mean, population spread, mixed verdicts", "[profile]") {
  const auto trial = [](double rate, const char* bound, std::int64_t kernels) {
    nlohmann::ordered_json p;
    p["bound"] = bound;
    p["img_per_s"] = rate;
    p["step_ms"] = 1000.0 * 8 / rate;
    p["kernels_per_step"] = kernels;
    p["gpu_util"] = nullptr;
    p["metrics"] = {{"img_per_s", rate}, {"step_ms", 1000.0 * 8 / rate}, {"bound", bound}};
    return p;
  };
  const auto same = aggregate_trials({trial(10, "compute", 100), trial(12, "compute", 102)}, {"a/profile.json", "b/profile.json"});
  CHECK(same["img_per_s"].get<double>() == Approx(11));
  CHECK(same["img_per_s_std"].get<double>() == Approx(1));  // population: sqrt(((10-11)^2 + (12-11)^2) / 2)
  CHECK(same["img_per_s_n"] == 2);
  CHECK(same["bound"] == "compute");
  CHECK(same["kernels_per_step"] == 101);
  CHECK(same["kernels_per_step"].is_number_integer());
  CHECK(same["gpu_util"].is_null());
  CHECK(same["aggregation"]["representative_profile"] == "b/profile.json");
  CHECK(same["metrics"]["img_per_s"].get<double>() == Approx(11));
  const auto mixed = aggregate_trials({trial(10, "compute", 1), trial(12, "dataloader", 1)}, {"a", "b"});
  CHECK(mixed["bound"] == "mixed");
}

TEST_CASE("compare: significant only with n >= 2 on both sides and beyond two standard errors", "[profile]") {
  CHECK_FALSE(significant_difference(10, 0, 1, 20, 0, 5).has_value());
  CHECK(*significant_difference(10, 0.5, 3, 12, 0.5, 3));        // 2 > 2*sqrt(0.25/3*2) = 0.82
  CHECK_FALSE(*significant_difference(10, 2.0, 2, 12, 2.0, 2));  // 2 < 2*sqrt(4/2*2) = 4
  nlohmann::ordered_json a = {{"img_per_s", 10.0}, {"img_per_s_std", 0.1}, {"img_per_s_n", 3}, {"step_ms", 800.0},
                              {"config", {{"batch", 8}}}, {"bound", "compute"}};
  nlohmann::ordered_json b = {{"img_per_s", 12.0}, {"img_per_s_std", 0.1}, {"img_per_s_n", 3}, {"step_ms", 666.0},
                              {"config", {{"batch", 8}}}, {"bound", "dataloader"}};
  const auto c = compare_profiles(a, b);
  CHECK(c["rows"][0]["significant"] == true);
  CHECK(c["rows"][0]["delta_pct"].get<double>() == Approx(20));
  CHECK(c["rows"][1]["before"].get<double>() == Approx(100));  // ms per image
  CHECK(c["bound"]["after"] == "dataloader");
}

TEST_CASE("trace file round trip, flows and names kept", "[profile]") {
  Trace t;
  t.events.push_back({.name = "ProfilerStep#1", .category = category::annotation, .start_us = 10, .duration_us = 100, .pid = 7, .tid = 8});
  t.events.push_back({.name = "cudaLaunchKernel", .category = category::runtime, .start_us = 20, .duration_us = 2, .pid = 7, .tid = 8, .correlation = 5});
  t.events.push_back({.name = "gemm", .category = category::kernel, .start_us = 30, .duration_us = 9, .pid = kGpuProcessBase, .tid = 7, .correlation = 5});
  t.flows.push_back({.id = 5, .from_us = 20, .to_us = 30, .from_pid = 7, .from_tid = 8, .to_pid = kGpuProcessBase, .to_tid = 7});
  t.process_names[7] = "libreyolo (CPU)";
  t.thread_names[{7, 8}] = "training loop";
  const auto path = std::filesystem::temp_directory_path() / ("trace_" + std::to_string(::getpid()) + ".json");
  write_trace(path, t);
  const Trace back = read_trace(path);
  std::filesystem::remove(path);
  REQUIRE(back.events.size() == 3);
  CHECK(back.events[2].correlation == 5);
  CHECK(back.events[2].pid == kGpuProcessBase);
  REQUIRE(back.flows.size() == 1);
  CHECK(back.flows[0].to_us == 30);
  CHECK(back.process_names.at(7) == "libreyolo (CPU)");
  CHECK(back.thread_names.at({7, 8}) == "training loop");
  CHECK(profiler_step_number("ProfilerStep#12") == 12);
  CHECK(profiler_step_number("step/forward") == -1);
  CHECK_THROWS_AS(parse_trace(nlohmann::json::object(), "x.json"), libreyolo::UsageError);
  // no complete event: nothing to analyse, said instead of an empty report
  for (const char* empty : {"[]", R"({"traceEvents": []})", R"([{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "x"}}])"}) {
    INFO(empty);
    CHECK_THROWS_WITH(parse_trace(nlohmann::json::parse(empty), "e.json"), Catch::Contains("e.json: a trace without any complete"));
  }
}

TEST_CASE("timeline data: lanes, row packing, GPU phase spans, </ escaped", "[profile]") {
  Trace t;
  t.events.push_back({.name = "step/forward", .category = category::annotation, .start_us = 0, .duration_us = 100, .pid = 1, .tid = 1});
  t.events.push_back({.name = "aten::conv2d</script>", .category = category::cpu_op, .start_us = 10, .duration_us = 50, .pid = 1, .tid = 1});
  t.events.push_back({.name = "aten::convolution", .category = category::cpu_op, .start_us = 20, .duration_us = 30, .pid = 1, .tid = 1});
  t.events.push_back({.name = "aten::tiny", .category = category::cpu_op, .start_us = 70, .duration_us = 5, .pid = 1, .tid = 1});
  t.events.push_back({.name = "cudaLaunchKernel", .category = category::runtime, .start_us = 30, .duration_us = 2, .pid = 1, .tid = 1, .correlation = 1});
  t.events.push_back({.name = "gemm", .category = category::kernel, .start_us = 140, .duration_us = 20, .pid = kGpuProcessBase, .tid = 7, .correlation = 1});
  const auto data = timeline_data(t, nlohmann::ordered_json{{"bound", "compute"}, {"config", {{"batch", 2}}}});
  CHECK(data["lanes"].size() == 5);
  CHECK(data["lane_rows"][1] == 2);  // the nested operator takes a second row; the 5 us one is dropped
  CHECK(data["lane_rows"][2] == 1);  // forward on the GPU: the kernel it launched
  CHECK(data["total_ms"].get<double>() == Approx(0.16));
  int gpu_phase = 0;
  for (const auto& e : data["events"]) gpu_phase += e["lane"] == 2;
  CHECK(gpu_phase == 1);
  CHECK(data["analysis"]["bound"] == "compute");

  const auto page_path = std::filesystem::temp_directory_path() / ("timeline_" + std::to_string(::getpid()) + ".html");
  write_timeline(page_path, t, nlohmann::ordered_json{{"bound", "compute"}});
  std::ifstream in(page_path);
  const std::string page((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::filesystem::remove(page_path);
  CHECK(page.find("/*__DATA__*/") == std::string::npos);
  CHECK(page.find(R"(aten::conv2d<\/script>)") != std::string::npos);
  CHECK(page.find("aten::conv2d</script>") == std::string::npos);
  CHECK(page.find("http") == std::string::npos);  // self-contained: nothing fetched
}
