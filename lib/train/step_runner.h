// One micro-step of training: forward, loss and backward of one batch, returning the loss terms
// as device tensors (nothing is read back to the host here). The eager runner is the plain
// LibTorch path; a CUDA-graph runner will replay a captured step behind the same interface.
#pragma once

#include "models/loss_terms.h"
#include "models/targets.h"
#include "train/hooks.h"
#include "train/setup.h"

#include <ATen/Tensor.h>

namespace libreyolo::train {

class StepRunner {
 public:
  virtual ~StepRunner() = default;
  // `loss_divisor`: the accumulation window's length (the gradient is of total / divisor).
  virtual models::LossTerms run(const at::Tensor& input, const models::TargetBatch& targets, double loss_divisor) = 0;
};

class EagerStepRunner final : public StepRunner {
 public:
  EagerStepRunner(Training& training, HookList& hooks) : training_(training), hooks_(hooks) {}
  models::LossTerms run(const at::Tensor& input, const models::TargetBatch& targets, double loss_divisor) override;

 private:
  models::LossTerms forward_and_loss(const at::Tensor& input, const models::TargetBatch& targets);

  Training& training_;
  HookList& hooks_;
};

}  // namespace libreyolo::train
