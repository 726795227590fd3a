// The logged values of the steps since the last read, kept where they were computed: a sum per
// loss term (in double) and whether every gradient checked was finite. Reading them is the step's
// only device-to-host transfer, so on a GPU it happens every `read_every` micro-steps (the
// progress bar's losses and the divergence check follow that cadence) and the steps between run
// without a host sync; on the CPU a read costs nothing and happens every step.
#pragma once

#include "models/loss_terms.h"

#include <ATen/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace libreyolo::train {

class StepLosses {
 public:
  explicit StepLosses(int read_every) : read_every_(read_every < 1 ? 1 : read_every) {}

  // One micro-step's terms (total first, then `names`); `gradients_finite` (a bool scalar, or
  // undefined when not checked) is ANDed into the flag.
  void add(const models::LossTerms& terms, const std::vector<std::string>& names, const at::Tensor& gradients_finite);
  bool due() const { return steps_ >= read_every_; }
  bool empty() const { return steps_ == 0; }
  std::int64_t pending() const { return steps_; }

  struct Values {
    std::vector<double> sums;  // total, then each named term, summed over the steps
    std::int64_t steps = 0;
    bool gradients_finite = true;
  };
  Values read();  // and start again

 private:
  int read_every_;
  std::int64_t steps_ = 0;
  at::Tensor sums_, gradients_finite_;
};

}  // namespace libreyolo::train
