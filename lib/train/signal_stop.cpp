#include "train/signal_stop.h"

#include <atomic>
#include <fmt/format.h>

#include <csignal>
#include <cstring>
#include <unistd.h>

namespace libreyolo::train {

namespace {

std::atomic<int> stop_signal{0};
// The first signal asks for a save and a stop; a second one (Ctrl-C again during a slow save or
// validation) ends the process at once. Only async-signal-safe calls here: write and _exit.
extern "C" void on_stop_signal(int signal) {
  if (stop_signal.exchange(signal) == 0) return;
  static constexpr char message[] =
      "\nsecond stop signal: exiting now without saving; weights/last.pt holds the last completed save\n";
  [[maybe_unused]] const auto written = ::write(STDERR_FILENO, message, sizeof message - 1);
  ::_exit(128 + signal);
}

}  // namespace

SignalStopHook::SignalStopHook() {
  stop_signal = 0;
  previous_int_ = std::signal(SIGINT, on_stop_signal);
  previous_term_ = std::signal(SIGTERM, on_stop_signal);
  previous_hup_ = std::signal(SIGHUP, on_stop_signal);  // a closed terminal: save and stop too
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
