// CPU operator spans through LibTorch's RecordFunction callbacks: every ATen operator (and
// user-scope annotation) that starts while collecting, with its thread and times. Nothing is
// registered while no collector runs, so training without the profiler pays nothing.
#pragma once

#include "profile/trace.h"

#include <ATen/record_function.h>

#include <mutex>
#include <vector>

namespace libreyolo::profile {

// Microseconds on the profiler's clock (steady_clock, the clock CUPTI is told to use too).
double now_us();
std::int64_t current_thread_id();

class CpuOpCollector {
 public:
  CpuOpCollector();
  ~CpuOpCollector();
  CpuOpCollector(const CpuOpCollector&) = delete;
  CpuOpCollector& operator=(const CpuOpCollector&) = delete;

  void stop();  // idempotent
  std::vector<Event> take_events();

  void add(Event event);

 private:
  at::CallbackHandle handle_ = 0;
  bool running_ = false;
  std::mutex mutex_;
  std::vector<Event> events_;
};

}  // namespace libreyolo::profile
