#include "train/optimizer.h"

#include "core/error.h"
#include "train/capturable_optimizer.h"

#include <torch/nn/modules/batchnorm.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <map>
#include <set>

namespace libreyolo::train {

std::vector<double> ParameterGroups::lr_multipliers() const {
  std::vector<double> out;
  for (const auto& group : ruled) out.push_back(group.rule.lr_multiplier);
  return out;
}

std::optional<std::size_t> ParameterGroups::bias_group() const {
  if (!ruled.empty() || biases.empty()) return std::nullopt;
  return static_cast<std::size_t>(!bn.empty()) + static_cast<std::size_t>(!weights.empty());
}

ParameterGroups parameter_groups(torch::nn::Module& model, const models::ParameterRules& rules) {
  ParameterGroups groups;
  if (rules) {
    std::map<int, ParameterGroups::Ruled> by_group;
    for (const auto& item : model.named_parameters()) {
      if (!item.value().requires_grad()) continue;
      const models::ParameterRule rule = rules(item.key());
      auto& group = by_group[rule.group];
      group.rule = rule;
      group.names.push_back(item.key());
      group.params.push_back(item.value());
    }
    for (auto& [index, group] : by_group) groups.ruled.push_back(std::move(group));
    return groups;
  }
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
  const auto add = [&](const std::vector<at::Tensor>& params, double decay, double lr_multiplier = 1.0) {
    if (params.empty()) return;
    auto options = std::make_unique<Options>(base);
    options->weight_decay(decay);
    options->lr(base.lr() * lr_multiplier);
    out.emplace_back(params, std::move(options));
  };
  for (const auto& group : groups.ruled) add(group.params, group.rule.decay ? weight_decay : 0.0, group.rule.lr_multiplier);
  add(groups.bn, 0.0);
  add(groups.weights, weight_decay);
  add(groups.biases, 0.0);
  return out;
}

}  // namespace

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const ParameterGroups& groups, const OptimizerOptions& o) {
  if (groups.bn.empty() && groups.weights.empty() && groups.biases.empty() && groups.ruled.empty()) {
    throw UsageError("no trainable parameters");
  }
  if (o.name == "sgd") {
    const auto base = torch::optim::SGDOptions(o.lr0).momentum(o.momentum).nesterov(o.nesterov);
    return std::make_unique<ForeachSGD>(make_groups(groups, base, o.weight_decay), base);
  }
  if (o.name == "adam") {
    const auto base = torch::optim::AdamOptions(o.lr0);
    return std::make_unique<ForeachAdam>(make_groups(groups, base, o.weight_decay), base);
  }
  if (o.name == "adamw") {
    const auto base = torch::optim::AdamWOptions(o.lr0);
    return std::make_unique<ForeachAdamW>(make_groups(groups, base, o.weight_decay), base);
  }
  throw UsageError(fmt::format("optimizer={} is not one of sgd, adam, adamw", o.name));
}

void clip_gradients(const std::vector<at::Tensor>& grads, double max_norm) {
  if (grads.empty()) return;
  at::NoGradGuard no_grad;
  const at::Tensor total = at::stack(at::_foreach_norm(grads)).norm();
  at::_foreach_mul_(grads, (max_norm / (total + 1e-6)).clamp_max(1.0));
}

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr, const std::vector<double>& multipliers) {
  auto& groups = optimizer.param_groups();
  for (std::size_t g = 0; g < groups.size(); ++g) groups[g].options().set_lr(g < multipliers.size() ? lr * multipliers[g] : lr);
}

void set_group_learning_rate(torch::optim::Optimizer& optimizer, std::size_t group, double lr) {
  optimizer.param_groups().at(group).options().set_lr(lr);
}

void set_momentum(torch::optim::Optimizer& optimizer, double momentum) {
  for (auto& group : optimizer.param_groups()) {
    if (auto* sgd = dynamic_cast<torch::optim::SGDOptions*>(&group.options())) sgd->momentum(momentum);
  }
}

double learning_rate(const torch::optim::Optimizer& optimizer, std::size_t group) {
  return optimizer.param_groups().at(group).options().get_lr();
}

namespace {

c10::impl::GenericDict new_dict() { return c10::impl::GenericDict(c10::AnyType::get(), c10::AnyType::get()); }

}  // namespace

c10::IValue optimizer_state(torch::optim::Optimizer& optimizer) {
  if (auto* capturable = dynamic_cast<CapturableOptimizer*>(&optimizer)) capturable->write_back();
  c10::impl::GenericDict state = new_dict();
  c10::impl::GenericList groups(c10::AnyType::get());
  std::int64_t index = 0;
  for (const auto& group : optimizer.param_groups()) {
    c10::impl::GenericDict g = new_dict();
    c10::impl::GenericList params(c10::AnyType::get());
    const auto& options = group.options();
    g.insert("lr", options.get_lr());
    if (const auto* sgd = dynamic_cast<const torch::optim::SGDOptions*>(&options)) {
      g.insert("momentum", sgd->momentum());
      g.insert("dampening", sgd->dampening());
      g.insert("weight_decay", sgd->weight_decay());
      g.insert("nesterov", sgd->nesterov());
    } else if (const auto* adam = dynamic_cast<const torch::optim::AdamOptions*>(&options)) {
      g.insert("weight_decay", adam->weight_decay());
      g.insert("eps", adam->eps());
    } else if (const auto* adamw = dynamic_cast<const torch::optim::AdamWOptions*>(&options)) {
      g.insert("weight_decay", adamw->weight_decay());
      g.insert("eps", adamw->eps());
    }
    for (const auto& p : group.params()) {
      params.push_back(index);
      const auto found = optimizer.state().find(p.unsafeGetTensorImpl());
      if (found != optimizer.state().end()) {
        c10::impl::GenericDict entry = new_dict();
        if (const auto* sgd = dynamic_cast<const torch::optim::SGDParamState*>(found->second.get())) {
          if (sgd->momentum_buffer().defined()) entry.insert("momentum_buffer", sgd->momentum_buffer());
        } else if (const auto* adam = dynamic_cast<const torch::optim::AdamParamState*>(found->second.get())) {
          entry.insert("step", at::scalar_tensor(static_cast<double>(adam->step())));
          entry.insert("exp_avg", adam->exp_avg());
          entry.insert("exp_avg_sq", adam->exp_avg_sq());
        } else if (const auto* adamw = dynamic_cast<const torch::optim::AdamWParamState*>(found->second.get())) {
          entry.insert("step", at::scalar_tensor(static_cast<double>(adamw->step())));
          entry.insert("exp_avg", adamw->exp_avg());
          entry.insert("exp_avg_sq", adamw->exp_avg_sq());
        }
        if (entry.size()) state.insert(index, entry);
      }
      ++index;
    }
    g.insert("params", params);
    groups.push_back(g);
  }
  c10::impl::GenericDict out = new_dict();
  out.insert("state", state);
  out.insert("param_groups", groups);
  return out;
}

void load_optimizer_state(torch::optim::Optimizer& optimizer, const c10::IValue& value) {
  if (!value.isGenericDict()) throw ModelError("checkpoint optimizer state is not a dict");
  const auto dict = value.toGenericDict();
  if (!dict.contains("state") || !dict.contains("param_groups")) throw ModelError("checkpoint optimizer state lacks state/param_groups");
  const auto groups = dict.at("param_groups").toList();
  if (groups.size() != optimizer.param_groups().size()) {
    throw ModelError(fmt::format("checkpoint optimizer has {} parameter groups, this model {}", groups.size(),
                                 optimizer.param_groups().size()));
  }
  const auto state = dict.at("state").toGenericDict();
  std::int64_t index = 0;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    auto& group = optimizer.param_groups()[g];
    const auto saved = groups.get(g).toGenericDict();
    if (saved.at("params").toList().size() != group.params().size()) {
      throw ModelError(fmt::format("checkpoint optimizer group {} has {} parameters, this model {}", g,
                                   saved.at("params").toList().size(), group.params().size()));
    }
    group.options().set_lr(saved.at("lr").toDouble());
    if (auto* sgd = dynamic_cast<torch::optim::SGDOptions*>(&group.options()); sgd && saved.contains("momentum")) {
      sgd->momentum(saved.at("momentum").toDouble());
    }
    for (const auto& p : group.params()) {
      const c10::IValue key(index++);
      if (!state.contains(key)) continue;
      const auto entry = state.at(key).toGenericDict();
      const auto tensor = [&](const char* name) { return entry.at(name).toTensor().to(p.device()).clone(); };
      void* slot = p.unsafeGetTensorImpl();
      if (dynamic_cast<torch::optim::SGDOptions*>(&group.options())) {
        auto s = std::make_unique<torch::optim::SGDParamState>();
        if (entry.contains("momentum_buffer")) s->momentum_buffer(tensor("momentum_buffer"));
        optimizer.state()[slot] = std::move(s);
      } else if (dynamic_cast<torch::optim::AdamWOptions*>(&group.options())) {
        auto s = std::make_unique<torch::optim::AdamWParamState>();
        s->step(static_cast<std::int64_t>(entry.at("step").toTensor().item<double>()));
        s->exp_avg(tensor("exp_avg"));
        s->exp_avg_sq(tensor("exp_avg_sq"));
        optimizer.state()[slot] = std::move(s);
      } else {
        auto s = std::make_unique<torch::optim::AdamParamState>();
        s->step(static_cast<std::int64_t>(entry.at("step").toTensor().item<double>()));
        s->exp_avg(tensor("exp_avg"));
        s->exp_avg_sq(tensor("exp_avg_sq"));
        optimizer.state()[slot] = std::move(s);
      }
    }
  }
  if (auto* capturable = dynamic_cast<CapturableOptimizer*>(&optimizer)) capturable->state_loaded();
}

}  // namespace libreyolo::train
