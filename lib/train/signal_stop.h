// SIGINT / SIGTERM / SIGHUP during training: the handler only records the signal; this hook turns
// it into a stop request, which the loop carries out at the end of the accumulation window by
// saving last.pt and ending with 128 + the signal (130 / 143 / 129). A second signal exits at once. The previous handlers come back when it is destroyed.
#pragma once

#include "train/hooks.h"

namespace libreyolo::train {

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
