// SIGINT / SIGTERM / SIGHUP during training: the handler only records the signal; this hook turns
// it into a stop request, which the loop carries out at the end of the accumulation window by
// saving last.pt and ending with 128 + the signal (130 / 143 / 129). The previous handlers come back when it is destroyed.
#pragma once

#include "train/hooks.h"

#include <cstdint>

namespace libreyolo::train {

class SignalStopHook final : public TrainHook {
 public:
  SignalStopHook();
  ~SignalStopHook() override;
  SignalStopHook(const SignalStopHook&) = delete;
  SignalStopHook& operator=(const SignalStopHook&) = delete;

  std::optional<StopRequest> should_stop(const TrainState& state) override;
  // LIBREYOLO_STOP_AFTER_BATCHES=N (tests): raises SIGINT after N batches of this process.
  void on_step_end(const TrainState& state) override;

 private:
  using Handler = void (*)(int);
  Handler previous_int_, previous_term_, previous_hup_;
  std::int64_t stop_after_batches_ = -1;
  std::int64_t batches_ = 0;
};

}  // namespace libreyolo::train
