// Optimizer parameter groups as LibreYOLO forms them and the optimizers over them: pg0 =
// BatchNorm weights (no decay), pg1 = other weights (weight_decay), pg2 = biases and any other
// trainable parameter (no decay); SGD (momentum, nesterov), Adam or AdamW, all groups at lr0.
#pragma once

#include <ATen/Tensor.h>
#include <torch/nn/module.h>
#include <ATen/core/ivalue.h>
#include <torch/optim/optimizer.h>

#include <memory>
#include <string>
#include <vector>

namespace libreyolo::train {

struct ParameterGroups {
  std::vector<std::string> bn_names, weight_names, bias_names;  // dotted names, module order
  std::vector<at::Tensor> bn, weights, biases;
};

ParameterGroups parameter_groups(torch::nn::Module& model);

struct OptimizerOptions {
  std::string name = "sgd";  // sgd | adam | adamw
  double lr0 = 0.01;
  double momentum = 0.937;
  bool nesterov = true;
  double weight_decay = 5e-4;
};

// Groups in the order pg0, pg1, pg2 (empty ones left out), on the capturable optimizers of
// capturable_optimizer.h. Throws UsageError for an unknown name.
std::unique_ptr<torch::optim::Optimizer> make_optimizer(const ParameterGroups& groups, const OptimizerOptions& options);

// Scales `grads` in place so that their joint 2-norm is at most `max_norm` (torch's
// clip_grad_norm_), with foreach kernels and no host sync (LibTorch's returns the norm as a double):
// capturable in a CUDA graph.
void clip_gradients(const std::vector<at::Tensor>& grads, double max_norm);

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr);
void set_momentum(torch::optim::Optimizer& optimizer, double momentum);  // SGD only; no-op otherwise
double learning_rate(const torch::optim::Optimizer& optimizer, std::size_t group = 0);

// The optimizer's state in torch.optim's state_dict layout ({"state": {index: {momentum_buffer |
// step, exp_avg, exp_avg_sq}}, "param_groups": [{lr, momentum, ..., params: [index...]}]}), with
// parameters numbered across groups in order, as PyTorch does. Loading checks the layout matches.
c10::IValue optimizer_state(torch::optim::Optimizer& optimizer);
void load_optimizer_state(torch::optim::Optimizer& optimizer, const c10::IValue& state);

}  // namespace libreyolo::train
