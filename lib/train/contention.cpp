#include "train/contention.h"

#include "core/log.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace libreyolo::train {

std::optional<int> ThreadGovernor::observe(double waiting) {
  if (waiting > kContended) {
    calm_samples_ = 0;
    if (just_restored_) calm_needed_ = std::min(calm_needed_ * 2, 64);  // the full count brought it back: wait longer
    just_restored_ = false;
    if (threads_ > 1) {
      threads_ = std::max(1, threads_ / 2);
      return threads_;
    }
    return std::nullopt;
  }
  just_restored_ = false;
  if (threads_ < full_ && waiting < kCalm && ++calm_samples_ >= calm_needed_) {
    calm_samples_ = 0;
    threads_ = full_;
    just_restored_ = true;
    return threads_;
  }
  if (waiting >= kCalm) calm_samples_ = 0;
  return std::nullopt;
}

std::optional<double> process_run_delay_seconds() {
  std::error_code error;
  double total_ns = 0;
  bool any = false;
  for (std::filesystem::directory_iterator it("/proc/self/task", error), end; !error && it != end; it.increment(error)) {
    std::ifstream stat(it->path() / "schedstat");  // "<on-cpu ns> <run-queue wait ns> <slices>"
    double running = 0, waiting = 0;
    if (stat >> running >> waiting) {
      total_ns += waiting;
      any = true;
    }
  }
  if (!any) return std::nullopt;
  return total_ns / 1e9;
}

namespace {

class ContentionHook final : public TrainHook {
 public:
  explicit ContentionHook(int threads) : full_(threads), governor_(threads) {}
  ~ContentionHook() override { restore(); }
  ContentionHook(const ContentionHook&) = delete;
  ContentionHook& operator=(const ContentionHook&) = delete;

  void on_train_end(const TrainState&, nlohmann::ordered_json&) override { restore(); }

  void on_step_end(const TrainState&) override {
    const auto now = std::chrono::steady_clock::now();
    const double elapsed = std::chrono::duration<double>(now - sampled_at_).count();
    if (elapsed < kSampleSeconds) return;
    const auto delay = process_run_delay_seconds();
    if (!delay) return;
    if (last_delay_) {
      const double waiting = (*delay - *last_delay_) / elapsed;
      const int before = governor_.threads();
      if (const auto threads = governor_.observe(waiting)) {
        at::set_num_threads(*threads);
        if (*threads < before && !told_) {
          log::warn("CPU contention: this run's threads waited {:.1f} s per second for a CPU; intra-op threads {} -> {} "
                    "while it lasts (OMP_NUM_THREADS=N fixes the count)",
                    waiting, before, *threads);
          told_ = true;
        }
      }
    }
    last_delay_ = delay;
    sampled_at_ = now;
  }

 private:
  void restore() {  // what comes after training (validation, the next run) has the full count again
    if (at::get_num_threads() != full_) at::set_num_threads(full_);
  }

  static constexpr double kSampleSeconds = 2.0;
  int full_;
  ThreadGovernor governor_;
  std::optional<double> last_delay_;
  std::chrono::steady_clock::time_point sampled_at_ = std::chrono::steady_clock::now();
  bool told_ = false;
};

}  // namespace

std::unique_ptr<TrainHook> make_contention_hook(const c10::Device& device) {
  if (!device.is_cpu() || std::getenv("OMP_NUM_THREADS") != nullptr) return nullptr;
  const int threads = at::get_num_threads();
  if (threads < 2 || !process_run_delay_seconds()) return nullptr;
  return std::make_unique<ContentionHook>(threads);
}

}  // namespace libreyolo::train
