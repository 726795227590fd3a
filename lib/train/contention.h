// CPU contention: when another process wants the same cores, OpenMP threads that wait for each
// other at every barrier turn a fair 2x slowdown into 4-20x (bench/contention.py: two trainings
// on 2 cores). This hook watches how long the process's threads wait for a CPU (the scheduler's
// run-queue delay, /proc/self/task/*/schedstat) and, while that stays high, trains with fewer
// intra-op threads; when the machine is quiet again it goes back to the full count. It stays out
// of the way when OMP_NUM_THREADS is set, on CUDA, and with a single thread.
#pragma once

#include "train/hooks.h"

#include <chrono>
#include <memory>
#include <optional>

namespace libreyolo::train {

// The decision, apart from the clock and /proc, so that it is unit-tested on any machine.
class ThreadGovernor {
 public:
  explicit ThreadGovernor(int full_threads) : full_(full_threads), threads_(full_threads) {}
  // `waiting`: CPU-seconds the process's threads spent runnable but not running, per second of
  // wall time, over the last sample. Returns the new thread count when it changes.
  std::optional<int> observe(double waiting);
  int threads() const { return threads_; }

  static constexpr double kContended = 0.3;  // alone ~0.02 on 2 cores; sharing them ~1.0
  static constexpr double kCalm = 0.05;

 private:
  int full_, threads_;
  int calm_samples_ = 0;
  int calm_needed_ = 3;     // quiet samples before the full count is tried again; doubles after a failed try
  bool just_restored_ = false;
};

// Total run-queue delay of this process's threads in seconds; nullopt where /proc has no schedstat.
std::optional<double> process_run_delay_seconds();

// The hook (nullptr when it has nothing to do: OMP_NUM_THREADS set, one thread, no schedstat).
std::unique_ptr<TrainHook> make_contention_hook(const c10::Device& device);

}  // namespace libreyolo::train
