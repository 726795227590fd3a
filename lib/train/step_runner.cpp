#include "train/step_runner.h"

#include "train/amp.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

namespace libreyolo::train {

namespace {

// The network's maps (and the PGI branch's after them, one per level as well), through the
// network graph when there is one and `network_graph` is set.
// A network that takes the targets (RT-DETR) runs eager: its graph region is not the whole network.
std::vector<at::Tensor> network_outputs(Training& t, const at::Tensor& input, const models::TargetBatch& targets,
                                        bool network_graph) {
  models::DetectionModel& model = t.model();
  if (model.forward_train) return model.forward_train(input, targets);
  const NetworkFunction network = [&](const at::Tensor& x) {
    if (!t.use_aux) return model.forward(x);
    auto [maps, aux_maps] = model.forward_aux(x);
    maps.insert(maps.end(), aux_maps.begin(), aux_maps.end());
    return maps;
  };
  if (!t.graphs || !network_graph) return network(input);
  return t.graphs->forward(input, network, [&model] {
    CaptureTensors tensors{.parameters = {}, .buffers = model.module->buffers()};
    for (const auto& p : model.module->parameters()) {
      if (p.requires_grad()) tensors.parameters.push_back(p);  // frozen layers are not differentiated
    }
    return tensors;
  });
}

}  // namespace

struct EagerStepRunner::StaticStep {
  at::Tensor input, divisor;
  models::TargetBatch targets;
  models::LossTerms outputs;  // allocated by the first warm-up, written by every run of the graph
};

EagerStepRunner::EagerStepRunner(Training& training, HookList& hooks) : training_(training), hooks_(hooks) {}
EagerStepRunner::~EagerStepRunner() = default;

models::LossTerms EagerStepRunner::forward_and_loss(const at::Tensor& input, const models::TargetBatch& targets,
                                                    bool network_graph) {
  Training& t = training_;
  AutocastGuard guard(t.device.type(), t.amp_dtype, t.autocast, /*cache=*/!t.graphs);
  const models::TrainingLoss& loss = *t.loss;
  std::vector<at::Tensor> outputs = network_outputs(t, input, targets, network_graph);
  if (!t.use_aux) return loss(outputs, targets);
  const auto half = static_cast<std::ptrdiff_t>(outputs.size() / 2);
  const std::vector<at::Tensor> maps(outputs.begin(), outputs.begin() + half), aux_maps(outputs.begin() + half, outputs.end());
  models::LossTerms terms = loss(maps, targets);
  const models::LossTerms aux_terms = loss(aux_maps, targets);
  terms.total = terms.total + t.aux_weight * aux_terms.total;  // LibreYOLO: every term main + w * aux
  for (auto& [name, value] : terms.parts) value = value + t.aux_weight * aux_terms.part(name);
  return terms;
}

models::LossTerms EagerStepRunner::eager(const at::Tensor& input, const models::TargetBatch& targets, double loss_divisor) {
  models::LossTerms terms;
  {
    const auto phase = hooks_.phase(Phase::forward);
    terms = forward_and_loss(input, targets, /*network_graph=*/!training_.graphs || !training_.graphs->graphs_loss());
  }
  {
    const auto phase = hooks_.phase(Phase::backward);
    const at::Tensor scaled = training_.scaler->scale(terms.total / loss_divisor);
    hooks_.before_backward(scaled);
    scaled.backward();
  }
  return terms;
}

// The micro-step from static tensors: the batch is copied in (load), the graph's work computes the
// loss terms into static outputs and backpropagates scale · total / divisor into .grad, where
// eager autograd would accumulate it (the trainer zeroes the gradients in place, never frees them).
models::LossTerms EagerStepRunner::graphed(const at::Tensor& input, const models::TargetBatch& targets, double loss_divisor) {
  Training& t = training_;
  std::vector<std::int64_t> key = shape_key(input);
  key.push_back(targets.slots());
  models::LossTerms eager_terms;
  const auto load = [&] {
    if (!static_ || static_->input.sizes() != input.sizes() || static_->targets.slots() != targets.slots()) {
      static_ = std::make_unique<StaticStep>();
      static_->input = input.detach().clone();
      static_->targets = {targets.classes.clone(), targets.boxes_xyxy.clone(), targets.boxes_cxcywh.clone(), targets.valid.clone()};
      static_->divisor = at::empty({}, input.options().dtype(at::kFloat));
    } else {
      static_->input.copy_(input);
      static_->targets.classes.copy_(targets.classes);
      static_->targets.boxes_xyxy.copy_(targets.boxes_xyxy);
      static_->targets.boxes_cxcywh.copy_(targets.boxes_cxcywh);
      static_->targets.valid.copy_(targets.valid);
    }
    static_->divisor.fill_(loss_divisor);
  };
  // kept by the backend and run again at each replay on a re-running backend: refers to nothing local
  const auto work = [this] {
    StaticStep& s = *static_;
    const models::LossTerms terms = forward_and_loss(s.input, s.targets, /*network_graph=*/false);
    {
      at::NoGradGuard no_grad;
      if (!s.outputs.total.defined()) {
        s.outputs.total = at::empty_like(terms.total);
        for (const auto& [name, value] : terms.parts) s.outputs.parts.emplace_back(name, at::empty_like(value));
      }
      s.outputs.total.copy_(terms.total.detach());
      for (std::size_t i = 0; i < terms.parts.size(); ++i) s.outputs.parts[i].second.copy_(terms.parts[i].second.detach());
    }
    training_.scaler->scale(terms.total / s.divisor).backward();
  };
  const auto state = [this] {
    std::vector<at::Tensor> tensors = training_.model().module->buffers();
    for (const auto& p : training_.model().module->parameters()) {
      if (p.grad().defined()) tensors.push_back(p.grad());
    }
    return tensors;
  };
  const MicroStepWork step{.key = key,
                           .describe = [&] { return fmt::format("{}, {} label slots", fmt::join(input.sizes(), "x"), targets.slots()); },
                           .load = load,
                           .work = work,
                           .eager = [&] { eager_terms = eager(input, targets, loss_divisor); },
                           .state = state};
  std::optional<HookList::PhaseScope> phase;  // eager steps and the capture open their own phases
  if (t.graphs->will_replay(key)) phase.emplace(hooks_, Phase::forward);  // the graph holds forward, loss and backward
  return t.graphs->micro_step(step) ? static_->outputs : eager_terms;
}

models::LossTerms EagerStepRunner::run(const at::Tensor& input, const models::TargetBatch& targets, double loss_divisor) {
  if (training_.graphs && training_.graphs->graphs_loss()) return graphed(input, targets, loss_divisor);
  return eager(input, targets, loss_divisor);
}

}  // namespace libreyolo::train
