// SGD, Adam and AdamW whose step can be captured in a CUDA graph and needs no host sync:
//
//  - The hyperparameters the schedule changes (each group's lr, SGD's momentum) live in device
//    tensors. stage() copies the groups' host options into them, eagerly, before each step or
//    replay; apply() reads only device tensors, so a graph captured once follows the schedule.
//  - Adam's step counts are device tensors too (one per group; written back to the host state
//    for checkpoints by write_back()).
//  - apply(found_inf) masks a step whose gradients overflowed on the device, as PyTorch's fused
//    optimizers do under a GradScaler: where found_inf is non-zero, parameters, momentum buffers,
//    moments and step counts keep their values, and no host ever reads the flag.
//  - On the CPU (nothing to capture, nothing to sync) apply() reads the staged values back as
//    host Scalars and takes torch::optim's own op sequence; tests check both forms.
//
// They are torch::optim's SGD/Adam/AdamW with step() replaced by foreach kernels over the same
// options and per-parameter state, so checkpoints, param groups and set_learning_rate work as before.
// The update is the same arithmetic as torch::optim's (the tests compare them step by step).
#pragma once

#include <ATen/Tensor.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <vector>

namespace libreyolo::train {

class CapturableOptimizer {
 public:
  virtual ~CapturableOptimizer() = default;
  // Eager, before each step (or replay): the groups' lr/momentum into their device tensors, and any
  // missing state (momentum buffers, moments) for the parameters that have gradients.
  virtual void stage() = 0;
  // The update from device tensors only (capturable). `found_inf`: a float scalar on the
  // parameters' device, or undefined; where it is non-zero the step changes nothing.
  virtual void apply(const at::Tensor& found_inf) = 0;
  // Device-side counters into the host state (before optimizer_state() reads it).
  virtual void write_back() {}
  // The host state was replaced (a checkpoint loaded): device-side counters are re-read from it.
  virtual void state_loaded() {}
  // Tests: apply() in its device-tensor form on the CPU too (the form a GPU captures).
  void use_device_tensors(bool on) { device_tensors_ = on; }

 protected:
  // Whether apply() takes the staged values back as host Scalars: on the CPU, where reading them
  // costs nothing and torch::optim's fused `alpha` forms apply (the device form, a 0-dim tensor
  // broadcast per op and more ops, made SGD's CPU step 2.2x torch::optim's: bench/optimizer_step).
  bool host_scalars(const at::Tensor& parameter) const { return !device_tensors_ && parameter.is_cpu(); }
  bool device_tensors_ = false;
};

// Per group, on the parameters' device: lr and momentum (SGD, float), lr and the step count (Adam, double).
struct GroupScalars {
  at::Tensor lr, momentum, step;
};

class ForeachSGD final : public torch::optim::SGD, public CapturableOptimizer {
 public:
  ForeachSGD(const std::vector<torch::optim::OptimizerParamGroup>& groups, torch::optim::SGDOptions defaults);
  at::Tensor step(LossClosure closure = nullptr) override;  // stage() then apply({})
  void stage() override;
  void apply(const at::Tensor& found_inf) override;

 private:
  std::vector<GroupScalars> scalars_;
};

// Adam (L2 weight decay in the gradient) on torch::optim::Adam, AdamW (decoupled decay) on
// torch::optim::AdamW.
template <typename Base, typename Options, typename State>
class ForeachAdamBase final : public Base, public CapturableOptimizer {
 public:
  ForeachAdamBase(const std::vector<torch::optim::OptimizerParamGroup>& groups, Options defaults);
  at::Tensor step(torch::optim::Optimizer::LossClosure closure = nullptr) override;
  void stage() override;
  void apply(const at::Tensor& found_inf) override;
  void write_back() override;
  void state_loaded() override { scalars_.clear(); }

 private:
  std::vector<GroupScalars> scalars_;
};

using ForeachAdam = ForeachAdamBase<torch::optim::Adam, torch::optim::AdamOptions, torch::optim::AdamParamState>;
using ForeachAdamW = ForeachAdamBase<torch::optim::AdamW, torch::optim::AdamWOptions, torch::optim::AdamWParamState>;

}  // namespace libreyolo::train
