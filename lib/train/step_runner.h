// The steps of training as they run on the device, eager or replayed from CUDA graphs: a
// micro-step (forward, loss and backward of one batch, returning the loss terms as device
// tensors; nothing is read back to the host here), the optimizer step that ends an accumulation
// window, and the network validation runs. The loop calls these and never sees a graph.
#pragma once

#include "models/loss_terms.h"
#include "models/targets.h"
#include "train/hooks.h"
#include "train/setup.h"

#include <ATen/Tensor.h>

#include <memory>
#include <string>

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
  EagerStepRunner(Network& net, Optimisation& optim, Precision& precision, Graphs& graphs, c10::Device device, HookList& hooks);
  ~EagerStepRunner() override;
  models::LossTerms run(const at::Tensor& input, const models::TargetBatch& targets, double loss_divisor) override;

  // The label slots per image a captured loss was built for (max_labels under cuda_graph_scope=loss
  // and up), which the batch's loss targets are padded to (eval::Task::loss_targets); 0: none.
  std::int64_t label_slots() const { return graphs_.label_slots; }
  // At an accumulation window's start: the gradients zeroed; freed unless a graph reads them
  // where it was captured (a graphed optimizer step or loss), then zeroed in place.
  void begin_window();
  // The window's end: unscale and clip (clip > 0), the step through the loss scaler, the EMA,
  // then the next step's learning rate; `after_backward` and `before_optimizer_step` hooks first.
  void optimizer_step(TrainState& state);
  // The optimizer state, weights and scaler were reloaded (a divergence's recovery): graphs that
  // captured the old ones are dropped.
  void state_replaced(const std::string& reason);
  // The network a validation runs `model` with (autocast on a GPU as training, a graph per
  // recurring batch shape with cuda_graph=true); end_validation() gives the graphs' memory back
  // to training and says once how many batches they replayed.
  NetworkFunction validation_network(models::Model& model);
  void end_validation();
  // One line on how much of the run the graphs carried; empty without graphs.
  std::string graph_summary() const;

  struct StaticStep;  // the step graph's fixed input, targets, divisor and loss terms

 private:
  models::LossTerms forward_and_loss(const at::Tensor& input, const models::TargetBatch& targets, bool network_graph);
  models::LossTerms eager(const at::Tensor& input, const models::TargetBatch& targets, double loss_divisor);
  models::LossTerms graphed(const at::Tensor& input, const models::TargetBatch& targets, double loss_divisor);

  Network& net_;
  Optimisation& optim_;
  Precision& precision_;
  Graphs& graphs_;
  c10::Device device_;
  HookList& hooks_;
  std::unique_ptr<StaticStep> static_;
  bool validation_graphs_logged_ = false;
};

}  // namespace libreyolo::train
