#include "train/signal_stop.h"

#include <atomic>
#include <fmt/format.h>

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
  previous_hup_ = std::signal(SIGHUP, on_stop_signal);  // a closed terminal: save and stop too
  if (const char* stop_after = std::getenv("LIBREYOLO_STOP_AFTER_BATCHES")) stop_after_batches_ = std::atoll(stop_after);
}

void SignalStopHook::on_step_end(const TrainState&) {
  if (++batches_ == stop_after_batches_) std::raise(SIGINT);
}

SignalStopHook::~SignalStopHook() {
  std::signal(SIGINT, previous_int_);
  std::signal(SIGTERM, previous_term_);
  std::signal(SIGHUP, previous_hup_);
}

std::optional<StopRequest> SignalStopHook::should_stop(const TrainState&) {
  const int signal = stop_signal.load();
  if (!signal) return std::nullopt;
  const char* name = signal == SIGTERM ? "SIGTERM" : signal == SIGHUP ? "SIGHUP" : "SIGINT";
  return StopRequest{.kind = StopRequest::Kind::interrupt, .exit_code = 128 + signal, .state = "interrupted",
                     .message = fmt::format("{} received", name)};
}

}  // namespace libreyolo::train
