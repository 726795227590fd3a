// What the profiler costs on the CPU, measured in one process so that start-up and page-cache
// noise cancel: a YOLOv9-t training step (forward, a sum as the loss, backward, SGD step) timed
// plain, inside the profiler's unsynchronised half (phase spans, step markers: what the real
// step time is measured with), and with every operator recorded (the synchronised half),
// alternating, median of `repeat` rounds; plus the cost per operator on tiny additions.
//   bench/profiler_cost [imgsz=160] [batch=8] [repeat=9] [model=yolo9-t]
#include "median.h"
#include "models/model.h"
#include "profile/cpu_op_collector.h"
#include "profile/step_profiler.h"

#include <ATen/ATen.h>
#include <fmt/core.h>
#include <nlohmann/json.hpp>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <filesystem>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>

using namespace libreyolo;
using Clock = std::chrono::steady_clock;

namespace {

double ms_since(Clock::time_point start) { return std::chrono::duration<double, std::milli>(Clock::now() - start).count(); }

using bench::median;

std::string argument(int argc, char** argv, const std::string& key, const std::string& fallback) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind(key + "=", 0) == 0) return a.substr(key.size() + 1);
  }
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  const int image_size = std::stoi(argument(argc, argv, "imgsz", "160"));
  const int batch = std::stoi(argument(argc, argv, "batch", "8"));
  const int repeat = std::stoi(argument(argc, argv, "repeat", "9"));
  const std::string name = argument(argc, argv, "model", "yolo9-t");

  auto model = models::build_model(models::parse_model_name(name), 80);
  model.module->train();
  torch::optim::SGD optimizer(model.module->parameters(), torch::optim::SGDOptions(0.001).momentum(0.9));
  const auto input = at::rand({batch, 3, image_size, image_size});
  std::int64_t ops_per_step = 0;
  // Stays in its unsynchronised half for the whole run (warmup 0, a window longer than the run).
  const auto run_dir = std::filesystem::temp_directory_path() / "libreyolo_profiler_cost";
  profile::StepProfiler profiler({.warmup = 0, .steps = 4 * repeat + 8, .trace = true, .quiet = true, .run_dir = run_dir});
  const auto step = [&](profile::StepProfiler* p) {
    const auto start = Clock::now();
    if (p) p->before_fetch(), p->after_fetch(true);
    optimizer.zero_grad();
    at::Tensor loss = at::zeros({});
    {
      const auto phase = profile::scoped_phase(p, "forward");
      for (const auto& map : model.forward(input)) loss = loss + map.to(at::kFloat).mean();
    }
    {
      const auto phase = profile::scoped_phase(p, "backward");
      loss.backward();
    }
    {
      const auto phase = profile::scoped_phase(p, "optimizer");
      optimizer.step();
    }
    if (p) p->end_step();
    return ms_since(start);
  };
  step(nullptr);  // warm-up
  std::vector<double> plain, unsynced, recorded;
  for (int round = 0; round < repeat; ++round) {
    plain.push_back(step(nullptr));
    unsynced.push_back(step(&profiler));
    profile::CpuOpCollector collector;
    recorded.push_back(step(nullptr));
    collector.stop();
    ops_per_step = static_cast<std::int64_t>(collector.take_events().size());
  }
  const double plain_ms = median(plain), unsynced_ms = median(unsynced), recorded_ms = median(recorded);
  fmt::print("{}\n", nlohmann::json{{"bench", "profiler_step"}, {"model", name}, {"imgsz", image_size}, {"batch", batch},
                                    {"repeat", repeat}, {"step_ms_plain", plain_ms}, {"step_ms_unsynced_half", unsynced_ms},
                                    {"step_ms_ops_recorded", recorded_ms}, {"ops_per_step", ops_per_step},
                                    {"unsynced_inflation_pct", 100 * (unsynced_ms - plain_ms) / plain_ms},
                                    {"ops_recording_inflation_pct", 100 * (recorded_ms - plain_ms) / plain_ms}}.dump());

  // Per operator: 200k additions on a 1-element tensor.
  const auto tiny = at::zeros({1});
  const auto additions = [&] {
    const auto start = Clock::now();
    for (int i = 0; i < 200000; ++i) tiny.add_(1);
    return ms_since(start) * 1e6 / 200000;  // ns per addition
  };
  additions();
  std::vector<double> plain_ns, traced_ns;
  for (int round = 0; round < 5; ++round) {
    plain_ns.push_back(additions());
    profile::CpuOpCollector collector;
    traced_ns.push_back(additions());
  }
  fmt::print("{}\n", nlohmann::json{{"bench", "profiler_op"}, {"ns_per_op_off", median(plain_ns)}, {"ns_per_op_on", median(traced_ns)},
                                    {"overhead_ns_per_op", median(traced_ns) - median(plain_ns)}}.dump());
  return 0;
}
