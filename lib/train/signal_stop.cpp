#include "train/signal_stop.h"

#include <atomic>
#include <csignal>
#include <cstdlib>

namespace libreyolo::train {

namespace {

std::atomic<int> stop_signal{0};
extern "C" void on_stop_signal(int signal) { stop_signal = signal; }

}  // namespace

SignalStopHook::SignalStopHook() {
  stop_signal = 0;
  previous_int_ = std::signal(SIGINT, on_stop_signal);
  previous_term_ = std::signal(SIGTERM, on_stop_signal);
  if (const char* stop_after = std::getenv("LIBREYOLO_STOP_AFTER_BATCHES")) stop_after_batches_ = std::atoll(stop_after);
}

void SignalStopHook::on_step_end(const TrainState&) {
  if (++batches_ == stop_after_batches_) std::raise(SIGINT);
}

SignalStopHook::~SignalStopHook() {
  std::signal(SIGINT, previous_int_);
  std::signal(SIGTERM, previous_term_);
}

std::optional<StopRequest> SignalStopHook::should_stop(const TrainState&) {
  const int signal = stop_signal.load();
  if (!signal) return std::nullopt;
  const bool term = signal == SIGTERM;
  return StopRequest{.kind = StopRequest::Kind::interrupt, .exit_code = term ? 143 : 130, .state = "interrupted",
                     .message = term ? "SIGTERM received" : "SIGINT received"};
}

}  // namespace libreyolo::train
