// precise_bn=N (LibreYOLO): before the final validation, BatchNorm running statistics are
// recomputed from N training images in one forward-only pass, instead of the momentum-lagged
// estimates heavy augmentation leaves. Each batch runs with momentum 1 (so a layer's running
// stats are that batch's), and the batches are pooled: mean = E[batch mean], var =
// E[batch var + batch mean²] - mean², weighted by images. LibreYOLO pools exact sums over
// every activation; the two agree up to each batch's unbiased-variance factor (n-1)/n, n the
// activations per channel in a batch (under 0.1% for n ≥ 1000).
#pragma once

#include <ATen/Tensor.h>
#include <torch/nn/module.h>

#include <functional>
#include <memory>
#include <optional>
#include <vector>

namespace libreyolo::train {

struct BatchNormTarget {
  torch::nn::Module* module = nullptr;
  std::function<void(const at::Tensor&)> forward;               // a training-mode forward
  std::vector<std::shared_ptr<torch::nn::Module>> excluded;     // frozen layers keep their statistics
};

// Draws inputs from `next_input` until `images` are used (the last batch trimmed) or it runs
// dry; every target sees the same batches. Modes, momentums and counters are restored.
// Returns the images used (0: nothing changed).
std::int64_t recompute_batch_norm(const std::vector<BatchNormTarget>& targets,
                                  const std::function<std::optional<at::Tensor>()>& next_input, std::int64_t images);

}  // namespace libreyolo::train
