#include "train/optimizer.h"

#include "core/error.h"

#include <torch/nn/modules/batchnorm.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <fmt/format.h>

#include <set>

namespace libreyolo::train {

ParameterGroups parameter_groups(torch::nn::Module& model) {
  ParameterGroups groups;
  std::set<const void*> captured;
  const auto add = [&](std::vector<at::Tensor>& group, std::vector<std::string>& names, const std::string& name,
                       const at::Tensor& p) {
    if (!p.defined() || !p.requires_grad() || captured.count(p.unsafeGetTensorImpl())) return;
    group.push_back(p);
    names.push_back(name);
    captured.insert(p.unsafeGetTensorImpl());
  };
  for (const auto& item : model.named_modules()) {
    const std::string prefix = item.key().empty() ? "" : item.key() + ".";
    torch::nn::Module& module = *item.value();
    const auto own = module.named_parameters(/*recurse=*/false);
    if (const auto* bias = own.find("bias")) add(groups.biases, groups.bias_names, prefix + "bias", *bias);
    const bool batch_norm = dynamic_cast<torch::nn::BatchNorm2dImpl*>(&module) != nullptr ||
                            dynamic_cast<torch::nn::BatchNorm1dImpl*>(&module) != nullptr;
    if (const auto* weight = own.find("weight")) {
      if (batch_norm) add(groups.bn, groups.bn_names, prefix + "weight", *weight);
      else add(groups.weights, groups.weight_names, prefix + "weight", *weight);
    }
  }
  for (const auto& item : model.named_parameters()) add(groups.biases, groups.bias_names, item.key(), item.value());
  return groups;
}

namespace {

template <typename Options>
std::vector<torch::optim::OptimizerParamGroup> make_groups(const ParameterGroups& groups, const Options& base,
                                                           double weight_decay) {
  std::vector<torch::optim::OptimizerParamGroup> out;
  const auto add = [&](const std::vector<at::Tensor>& params, double decay) {
    if (params.empty()) return;
    auto options = std::make_unique<Options>(base);
    options->weight_decay(decay);
    out.emplace_back(params, std::move(options));
  };
  add(groups.bn, 0.0);
  add(groups.weights, weight_decay);
  add(groups.biases, 0.0);
  return out;
}

}  // namespace

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const ParameterGroups& groups, const OptimizerOptions& o) {
  if (groups.bn.empty() && groups.weights.empty() && groups.biases.empty()) {
    throw UsageError("no trainable parameters");
  }
  if (o.name == "sgd") {
    const auto base = torch::optim::SGDOptions(o.lr0).momentum(o.momentum).nesterov(o.nesterov);
    return std::make_unique<torch::optim::SGD>(make_groups(groups, base, o.weight_decay), base);
  }
  if (o.name == "adam") {
    const auto base = torch::optim::AdamOptions(o.lr0);
    return std::make_unique<torch::optim::Adam>(make_groups(groups, base, o.weight_decay), base);
  }
  if (o.name == "adamw") {
    const auto base = torch::optim::AdamWOptions(o.lr0);
    return std::make_unique<torch::optim::AdamW>(make_groups(groups, base, o.weight_decay), base);
  }
  throw UsageError(fmt::format("optimizer={} is not one of sgd, adam, adamw", o.name));
}

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
}

void set_momentum(torch::optim::Optimizer& optimizer, double momentum) {
  for (auto& group : optimizer.param_groups()) {
    if (auto* sgd = dynamic_cast<torch::optim::SGDOptions*>(&group.options())) sgd->momentum(momentum);
  }
}

double learning_rate(const torch::optim::Optimizer& optimizer, std::size_t group) {
  return optimizer.param_groups().at(group).options().get_lr();
}

}  // namespace libreyolo::train
