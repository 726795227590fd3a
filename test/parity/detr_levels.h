// What the DETR parity checkers share: the batch's targets and the reference's denoising draws as
// the reference scripts write them (detr_reference.py), and the comparison of every training output
// level (last, aux<i>, dn<i>) with the weighted sum whose gradients the checkers compare.
#pragma once

#include "models/detr_common/criterion.h"
#include "models/detr_common/denoising.h"
#include "module_parity.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>
#include <fmt/core.h>

#include <string>
#include <utility>
#include <vector>

namespace parity {

inline libreyolo::models::detr::DetrTargets targets_of(const Tensors& io) {
  const at::Tensor counts = io.at("counts").contiguous();
  return {io.at("classes"), io.at("boxes"),
          std::vector<std::int64_t>(counts.data_ptr<std::int64_t>(), counts.data_ptr<std::int64_t>() + counts.numel())};
}

inline libreyolo::models::detr::DenoisingNoise noise_of(const Tensors& io) {
  return {io.at("noise.label_uniform"), io.at("noise.random_label"), io.at("noise.sign_bit"), io.at("noise.box_uniform")};
}

// Compares every output level with "train.<level>.<key>" into `train` (a level the reference lacks
// fails it) and returns the sum of each output times "weights.<level>.<key>"; `levels` counts ours.
// eval_then_train's other half: the model's eval outputs compared into `eval`, then its training
// outputs on the reference's targets and denoising draws (`denoising`: the options but the draws).
template <typename Model, typename Input>
auto eval_then_train(Model& model, const Input& input, const Tensors& io, const libreyolo::models::detr::DenoisingOptions& denoising,
                     Comparison& eval, std::int64_t* denoising_queries = nullptr) {
  model->eval();
  {
    torch::NoGradGuard no_grad;
    const auto out = model->forward(input);
    eval.add(out.last.logits, io.at("eval.logits"));
    eval.add(out.last.boxes, io.at("eval.boxes"));
  }
  model->train();
  const auto queries = libreyolo::models::detr::make_denoising_queries(targets_of(io), denoising, noise_of(io));
  if (denoising_queries) *denoising_queries = queries.count;
  return model->forward(input, &queries);
}

inline at::Tensor compare_levels(const libreyolo::models::detr::DetrOutputs& out, const Tensors& io, Comparison& train,
                                 std::size_t& levels) {
  std::vector<std::pair<std::string, const libreyolo::models::detr::DetrLevel*>> named{{"last", &out.last}};
  for (std::size_t i = 0; i < out.auxiliary.size(); ++i) named.emplace_back(fmt::format("aux{}", i), &out.auxiliary[i]);
  for (std::size_t i = 0; i < out.denoising.size(); ++i) named.emplace_back(fmt::format("dn{}", i), &out.denoising[i]);
  std::size_t expected = 0;
  for (const auto& [key, value] : io) expected += key.starts_with("train.") && key.ends_with(".pred_logits");
  if (expected != named.size()) train.missing();
  levels = named.size();
  at::Tensor total = at::zeros({});
  for (const auto& [label, level] : named) {
    for (const auto& [key, tensor] : {std::pair{"pred_logits", level->logits}, std::pair{"pred_boxes", level->boxes}}) {
      const std::string stem = fmt::format("{}.{}", label, key);
      if (!io.count("train." + stem)) {
        train.missing();
        continue;
      }
      train.add(tensor.detach(), io.at("train." + stem));
      total = total + (tensor * io.at("weights." + stem)).sum();
    }
  }
  return total;
}

}  // namespace parity
