#include "train/step_runner.h"

#include "train/amp.h"

#include <ATen/ATen.h>

namespace libreyolo::train {

models::LossTerms EagerStepRunner::forward_and_loss(const at::Tensor& input, const models::TargetBatch& targets) {
  Training& t = training_;
  AutocastGuard guard(t.device.type(), t.amp_dtype, t.autocast);
  const models::TrainingLoss& loss = *t.loss;
  if (!t.use_aux) return loss(t.model().forward(input), targets);
  const auto [maps, aux_maps] = t.model().forward_aux(input);
  models::LossTerms terms = loss(maps, targets);
  const models::LossTerms aux_terms = loss(aux_maps, targets);
  terms.total = terms.total + t.aux_weight * aux_terms.total;  // LibreYOLO: every term main + w * aux
  for (auto& [name, value] : terms.parts) value = value + t.aux_weight * aux_terms.part(name);
  return terms;
}

models::LossTerms EagerStepRunner::run(const at::Tensor& input, const models::TargetBatch& targets, double loss_divisor) {
  models::LossTerms terms;
  {
    const auto phase = hooks_.phase(Phase::forward);
    terms = forward_and_loss(input, targets);
  }
  {
    const auto phase = hooks_.phase(Phase::backward);
    training_.scaler->scale(terms.total / loss_divisor).backward();
  }
  return terms;
}

}  // namespace libreyolo::train
