// The training profiler (profile=true): drops `warmup` steps, then measures `steps` real steps.
// The first half runs unsynchronised (real step and data-wait times); the second synchronises
// the device around each phase to measure the step's composition. Operator and kernel traces
// are collected over the whole window. At the end it writes the artifacts and prints a report;
// training goes on unless the caller stops it.
#pragma once

#include "core/step_part.h"

#include "profile/cpu_op_collector.h"
#include "profile/kernel_collector.h"
#include "profile/summary.h"
#include "train/collectives.h"

#include <c10/core/Device.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>

namespace libreyolo::profile {

struct ProfilerOptions {
  int warmup = 5;
  int steps = 20;
  int accumulate = 1;  // the window is rounded up to whole accumulation windows
  bool trace = true;   // collect operator / kernel traces (profile_trace.json, timeline.html)
  bool quiet = false;  // no console report
  bool open = false;   // open timeline.html in a browser when a display is available
  c10::Device device = c10::Device(c10::kCPU);
  nlohmann::ordered_json meta = nlohmann::ordered_json::object();  // model, device, batch, imgsz, amp, amp_dtype, workers
  std::filesystem::path run_dir;
  // Data-parallel: every rank profiles the same window; when it closes, each rank's step time is
  // gathered to every rank and only the rank with `write` set writes the artifacts and reports.
  train::Collectives* collectives = nullptr;
  bool write = true;
};

struct ProfileResult {
  std::filesystem::path profile_json;
  std::string bound;
  double images_per_second = 0;
};

// Also the step-part listener of the thread that builds it (core/step_part.h): parts a family
// marks are timed as phases "<phase>/<part>" inside the phase they run in.
class StepProfiler final : public StepPartListener {
 public:
  explicit StepProfiler(ProfilerOptions options);
  ~StepProfiler() override;
  StepProfiler(const StepProfiler&) = delete;
  StepProfiler& operator=(const StepProfiler&) = delete;

  // Around the loader's next(): the data wait. The fetch that ends an epoch (no batch) is not a step.
  void before_fetch();
  void after_fetch(bool got_batch);

  // One phase of the step (to_device, forward, backward, optimizer). Synchronised in the second half.
  class Phase {
   public:
    Phase(StepProfiler* profiler, const char* name);
    ~Phase();
    Phase(const Phase&) = delete;
    Phase& operator=(const Phase&) = delete;

   private:
    StepProfiler* profiler_;
    const char* name_;
    double start_us_ = 0;
  };
  // Inside the measured window (after warmup, before the end).
  bool active() const { return !finished_ && step_index_ >= options_.warmup; }

  // After each loader iteration. True when this step closed the window (artifacts written).
  bool end_step();

  bool finished() const { return finished_; }

  void part_start(const char* name) override;
  void part_end(const char* name) override;
  const std::optional<ProfileResult>& result() const { return result_; }
  const ProfilerOptions& options() const { return options_; }

 private:
  bool synced_half() const { return active() && measured_ >= half_; }
  void start_window();
  void finish();
  void add_span(const std::string& name, double start_us, double end_us);
  void synchronize() const;
  std::vector<RankTiming> gather_rank_timings(const StepSummary& summary) const;

  ProfilerOptions options_;
  int half_ = 1;
  int step_index_ = 0;
  int measured_ = 0;
  bool finished_ = false;
  bool window_started_ = false;
  double fetch_start_us_ = 0;
  double step_start_us_ = 0;
  double real_step_us_ = 0;
  double dataload_us_ = 0;
  std::map<std::string, double> synced_us_;
  const char* current_phase_ = nullptr;         // the open phase (parts are named within it)
  std::vector<std::pair<std::string, double>> open_parts_;  // "<phase>/<part>" and start
  std::vector<Event> spans_;
  std::unique_ptr<CpuOpCollector> cpu_ops_;
  std::unique_ptr<KernelCollector> kernels_;
  std::string trace_missing_reason_;
  std::int64_t allocator_calls_at_start_ = 0;
  std::optional<double> allocator_calls_per_step_;
  std::int64_t pid_ = 0, tid_ = 0;
  std::optional<ProfileResult> result_;
};

// A phase scope that costs one pointer test when there is no profiler or no open window.
inline StepProfiler::Phase scoped_phase(StepProfiler* profiler, const char* name) {
  return StepProfiler::Phase(profiler && profiler->active() ? profiler : nullptr, name);
}

}  // namespace libreyolo::profile
