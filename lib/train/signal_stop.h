// SIGINT / SIGTERM / SIGHUP during training: the handler only records the signal; this hook turns
// it into a stop request, which the loop carries out at the end of the accumulation window by
// saving last.pt and ending with 128 + the signal (130 / 143 / 129). A second signal exits at once. The previous handlers come back when it is destroyed.
#pragma once

#include "train/hooks.h"

#include <filesystem>
#include <string>

namespace libreyolo::train {

// What the signal handler writes to `status_file` (atomically: temporary + rename, async-signal-safe
// calls only) when a second signal ends the process without saving: status.json then says so instead
// of "running"; `message` (where the last save is, or that there is none) ends the line it prints.
// Kept up to date by whoever writes status.json; cleared once the run has ended.
void prepare_second_signal_status(const std::filesystem::path& status_file, const std::string& text, const std::string& message);
void clear_second_signal_status();

class SignalStopHook final : public TrainHook {
 public:
  SignalStopHook();
  ~SignalStopHook() override;
  SignalStopHook(const SignalStopHook&) = delete;
  SignalStopHook& operator=(const SignalStopHook&) = delete;

  std::optional<StopRequest> should_stop(const TrainState& state) override;

 private:
  using Handler = void (*)(int);
  Handler previous_int_, previous_term_, previous_hup_;
};

}  // namespace libreyolo::train
