#include "train/precise_bn.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/nn/modules/batchnorm.h>

#include <algorithm>

namespace libreyolo::train {

namespace {

struct Layer {
  torch::nn::BatchNorm2dImpl* bn;
  std::optional<double> momentum;
  at::Tensor tracked;
  at::Tensor mean_sum, square_sum;  // weighted by images
};

}  // namespace

std::int64_t recompute_batch_norm(const std::vector<BatchNormTarget>& targets,
                                  const std::function<std::optional<at::Tensor>()>& next_input, std::int64_t images) {
  if (images <= 0 || targets.empty()) return 0;
  at::NoGradGuard no_grad;
  std::vector<std::vector<Layer>> layers(targets.size());
  std::vector<std::vector<std::pair<torch::nn::Module*, bool>>> modes(targets.size());
  for (std::size_t t = 0; t < targets.size(); ++t) {
    for (const auto& m : targets[t].module->modules()) modes[t].emplace_back(m.get(), m->is_training());
    targets[t].module->train();
    for (const auto& m : targets[t].module->modules()) {
      auto* bn = dynamic_cast<torch::nn::BatchNorm2dImpl*>(m.get());
      if (!bn || !bn->running_mean.defined()) continue;
      const bool excluded = std::any_of(targets[t].excluded.begin(), targets[t].excluded.end(),
                                        [&](const auto& e) { return e.get() == m.get(); });
      if (excluded) {
        bn->eval();
        continue;
      }
      layers[t].push_back({bn, bn->options.momentum(), bn->num_batches_tracked.clone(),
                           at::zeros_like(bn->running_mean, at::kDouble), at::zeros_like(bn->running_var, at::kDouble)});
      bn->options.momentum(1.0);
    }
  }
  std::int64_t used = 0;
  while (used < images) {
    auto input = next_input();
    if (!input) break;
    at::Tensor x = *input;
    if (x.size(0) > images - used) x = x.slice(0, 0, images - used);
    const double weight = static_cast<double>(x.size(0));
    for (std::size_t t = 0; t < targets.size(); ++t) {
      targets[t].forward(x);
      for (auto& layer : layers[t]) {
        const at::Tensor mean = layer.bn->running_mean.to(at::kDouble);
        layer.mean_sum.add_(mean, weight);
        layer.square_sum.add_(layer.bn->running_var.to(at::kDouble) + mean.square(), weight);
      }
    }
    used += x.size(0);
  }
  for (std::size_t t = 0; t < targets.size(); ++t) {
    for (auto& layer : layers[t]) {
      layer.bn->options.momentum(layer.momentum);
      layer.bn->num_batches_tracked.copy_(layer.tracked);
      if (used == 0) continue;
      const at::Tensor mean = layer.mean_sum / static_cast<double>(used);
      const at::Tensor var = (layer.square_sum / static_cast<double>(used) - mean.square()).clamp_min(0.0);
      layer.bn->running_mean.copy_(mean);
      layer.bn->running_var.copy_(var);
    }
    for (const auto& [module, training] : modes[t]) {
      if (training) module->train(); else module->eval();
    }
  }
  return used;
}

}  // namespace libreyolo::train
