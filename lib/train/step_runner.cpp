#include "train/step_runner.h"

#include "train/amp.h"

#include <ATen/ATen.h>

namespace libreyolo::train {

namespace {

// The network's maps (and the PGI branch's after them, one per level as well), through the
// CUDA-graph manager when there is one.
std::vector<at::Tensor> network_outputs(Training& t, const at::Tensor& input) {
  models::DetectionModel& model = t.model();
  const NetworkFunction network = [&](const at::Tensor& x) {
    if (!t.use_aux) return model.forward(x);
    auto [maps, aux_maps] = model.forward_aux(x);
    maps.insert(maps.end(), aux_maps.begin(), aux_maps.end());
    return maps;
  };
  if (!t.graphs) return network(input);
  return t.graphs->forward(input, network, [&model] {
    CaptureTensors tensors{.parameters = {}, .buffers = model.module->buffers()};
    for (const auto& p : model.module->parameters()) {
      if (p.requires_grad()) tensors.parameters.push_back(p);  // frozen layers are not differentiated
    }
    return tensors;
  });
}

}  // namespace

models::LossTerms EagerStepRunner::forward_and_loss(const at::Tensor& input, const models::TargetBatch& targets) {
  Training& t = training_;
  AutocastGuard guard(t.device.type(), t.amp_dtype, t.autocast, /*cache=*/!t.graphs);
  const models::TrainingLoss& loss = *t.loss;
  std::vector<at::Tensor> outputs = network_outputs(t, input);
  if (!t.use_aux) return loss(outputs, targets);
  const auto half = static_cast<std::ptrdiff_t>(outputs.size() / 2);
  const std::vector<at::Tensor> maps(outputs.begin(), outputs.begin() + half), aux_maps(outputs.begin() + half, outputs.end());
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
