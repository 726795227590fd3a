// One micro-step of training: forward, loss and backward of one batch, returning the loss terms
// as device tensors (nothing is read back to the host here).
#pragma once

#include "models/loss_terms.h"
#include "models/targets.h"
#include "train/hooks.h"
#include "train/setup.h"

#include <ATen/Tensor.h>

#include <memory>

namespace libreyolo::train {

class StepRunner {
 public:
  virtual ~StepRunner() = default;
  // `loss_divisor`: the accumulation window's length (the gradient is of total / divisor).
  virtual models::LossTerms run(const at::Tensor& input, const models::TargetBatch& targets, double loss_divisor) = 0;
};

// The plain LibTorch step; under cuda_graph_scope=loss and up, the whole micro-step (forward, loss,
// backward) replays from one graph for batches of the captured shape (the rest run eager).
class EagerStepRunner final : public StepRunner {
 public:
  EagerStepRunner(Training& training, HookList& hooks);
  ~EagerStepRunner() override;
  models::LossTerms run(const at::Tensor& input, const models::TargetBatch& targets, double loss_divisor) override;

  struct StaticStep;  // the step graph's fixed input, targets, divisor and loss terms

 private:
  models::LossTerms forward_and_loss(const at::Tensor& input, const models::TargetBatch& targets, bool network_graph);
  models::LossTerms eager(const at::Tensor& input, const models::TargetBatch& targets, double loss_divisor);
  models::LossTerms graphed(const at::Tensor& input, const models::TargetBatch& targets, double loss_divisor);

  Training& training_;
  HookList& hooks_;
  std::unique_ptr<StaticStep> static_;
};

}  // namespace libreyolo::train
