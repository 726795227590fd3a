// CPU operator spans through LibTorch's RecordFunction callbacks: every ATen operator and
// autograd function the training thread (and autograd's threads for it) runs while collecting,
// with its thread and times. Construct and stop it on the training thread. Nothing is registered
// while no collector runs, so training without the profiler pays nothing; while it runs, each
// operator costs two clock reads and an append to a per-thread buffer (no allocation, no shared lock).
#pragma once

#include "profile/trace.h"

#include <ATen/record_function.h>

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
  // The spans recorded so far on every thread (call after stop()).
  std::vector<Event> take_events();
  std::int64_t dropped() const { return dropped_; }  // spans not kept once a thread's cap was reached

 private:
  at::CallbackHandle handle_ = 0;
  std::int64_t dropped_ = 0;
  bool running_ = false;
};

}  // namespace libreyolo::profile
