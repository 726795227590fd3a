// Optimizer parameter groups as LibreYOLO forms them and the optimizers over them: pg0 =
// BatchNorm weights (no decay), pg1 = other weights (weight_decay), pg2 = biases and any other
// trainable parameter (no decay); SGD (momentum, nesterov), Adam or AdamW, all groups at lr0.
#pragma once

#include "models/family.h"

#include <ATen/Tensor.h>
#include <torch/nn/module.h>
#include <ATen/core/ivalue.h>
#include <torch/optim/optimizer.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace libreyolo::train {

struct ParameterGroups {
  std::vector<std::string> bn_names, weight_names, bias_names;  // dotted names, module order
  std::vector<at::Tensor> bn, weights, biases;

  // A family's own groups (models::Family::parameter_rules), by rule group, the empty ones left
  // out; when present the optimizer has these instead of the three above (which stay empty).
  struct Ruled {
    models::ParameterRule rule;
    std::vector<std::string> names;
    std::vector<at::Tensor> params;
  };
  std::vector<Ruled> ruled;
  // Each optimizer group's learning-rate multiplier, in the optimizer's order.
  std::vector<double> lr_multipliers() const;
  // The optimizer's index of the bias group (pg2), where it exists and no family rules replace it.
  std::optional<std::size_t> bias_group() const;
};

// The trainable parameters in groups: with `rules`, the family's; else the YOLO recipes' BatchNorm
// weights (no decay), other weights (decay) and biases (no decay).
ParameterGroups parameter_groups(torch::nn::Module& model, const models::ParameterRules& rules = {});

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

// Every group's learning rate: lr, times the group's multiplier where `multipliers` has one.
void set_learning_rate(torch::optim::Optimizer& optimizer, double lr, const std::vector<double>& multipliers = {});
void set_group_learning_rate(torch::optim::Optimizer& optimizer, std::size_t group, double lr);
void set_momentum(torch::optim::Optimizer& optimizer, double momentum);  // SGD only; no-op otherwise
double learning_rate(const torch::optim::Optimizer& optimizer, std::size_t group = 0);

// The optimizer's state in torch.optim's state_dict layout ({"state": {index: {momentum_buffer |
// step, exp_avg, exp_avg_sq}}, "param_groups": [{lr, momentum, ..., params: [index...]}]}), with
// parameters numbered across groups in order, as PyTorch does. Loading checks the layout matches.
c10::IValue optimizer_state(torch::optim::Optimizer& optimizer);
void load_optimizer_state(torch::optim::Optimizer& optimizer, const c10::IValue& state);

}  // namespace libreyolo::train
