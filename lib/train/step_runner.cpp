#include "train/step_runner.h"

#include "core/log.h"
#include "train/amp.h"
#include "train/capturable_optimizer.h"
#include "train/optimizer.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <string>
#include <vector>

namespace libreyolo::train {

namespace {

// What a graph captures of `modules`: their buffers, and the parameters that train (frozen
// layers are not differentiated).
CaptureTensors capture_tensors(const std::vector<std::shared_ptr<torch::nn::Module>>& modules) {
  CaptureTensors tensors;
  for (const auto& module : modules) {
    for (const auto& b : module->buffers()) tensors.buffers.push_back(b);
    for (const auto& p : module->parameters()) {
      if (p.requires_grad()) tensors.parameters.push_back(p);
    }
  }
  return tensors;
}

// The network's training outputs: the maps (and the PGI branch's after them, one per level as
// well), or what a network that takes the targets (RT-DETR) returns. With a network graph and
// `network_graph` set, its region replays from the graph: the whole network of a YOLO head, the
// backbone and encoder of a DETR (its decoder runs eager: the denoising queries follow the targets).
std::vector<at::Tensor> network_outputs(Network& net, Graphs& graphs, const at::Tensor& input, const models::TargetBatch& targets,
                                        bool network_graph) {
  models::Model& model = net.model();
  const bool graphed = graphs.training && network_graph;
  if (model.forward_train) {
    const models::Model::Region& region = model.train_region;
    if (!graphed || !region.run) return model.forward_train(input, targets);
    const std::vector<at::Tensor> features =
        graphs.training->forward(input, region.run, [&region] { return capture_tensors(region.modules); });
    return region.rest(input, features, targets);
  }
  const NetworkFunction network = [&](const at::Tensor& x) { return net.use_branch ? model.forward_branch(x) : model.forward(x); };
  if (!graphed) return network(input);
  return graphs.training->forward(input, network, [&model] { return capture_tensors({model.module}); });
}

}  // namespace

struct EagerStepRunner::StaticStep {
  at::Tensor input, divisor;
  models::TargetBatch targets;
  models::LossTerms outputs;  // allocated by the first warm-up, written by every run of the graph
};

EagerStepRunner::EagerStepRunner(Network& net, Optimisation& optim, Precision& precision, Graphs& graphs, c10::Device device,
                                 HookList& hooks)
    : net_(net), optim_(optim), precision_(precision), graphs_(graphs), device_(device), hooks_(hooks) {}
EagerStepRunner::~EagerStepRunner() = default;

models::LossTerms EagerStepRunner::forward_and_loss(const at::Tensor& input, const models::TargetBatch& targets,
                                                    bool network_graph) {
  AutocastGuard guard(device_.type(), precision_.amp_dtype, precision_.autocast, /*cache=*/!graphs_.training);
  const models::TrainingLoss& loss = *net_.loss;
  return loss(network_outputs(net_, graphs_, input, targets, network_graph), targets);
}

models::LossTerms EagerStepRunner::eager(const at::Tensor& input, const models::TargetBatch& targets, double loss_divisor) {
  models::LossTerms terms;
  {
    const auto phase = hooks_.phase(Phase::forward);
    terms = forward_and_loss(input, targets, /*network_graph=*/!graphs_.training || !graphs_.training->graphs_loss());
  }
  {
    const auto phase = hooks_.phase(Phase::backward);
    const at::Tensor scaled = precision_.scaler->scale(terms.total / loss_divisor);
    hooks_.before_backward(scaled);
    scaled.backward();
  }
  return terms;
}

// The micro-step from static tensors: the batch is copied in (load), the graph's work computes the
// loss terms into static outputs and backpropagates scale · total / divisor into .grad, where
// eager autograd would accumulate it (the trainer zeroes the gradients in place, never frees them).
models::LossTerms EagerStepRunner::graphed(const at::Tensor& input, const models::TargetBatch& targets, double loss_divisor) {
  std::vector<std::int64_t> key = shape_key(input);
  key.push_back(targets.slots());
  models::LossTerms eager_terms;
  const auto load = [&] {
    if (!static_ || static_->input.sizes() != input.sizes() || static_->targets.slots() != targets.slots()) {
      static_ = std::make_unique<StaticStep>();
      static_->input = input.detach().clone();
      static_->targets = targets.clone();
      static_->divisor = at::empty({}, input.options().dtype(at::kFloat));
    } else {
      static_->input.copy_(input);
      static_->targets.copy_(targets);
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
    precision_.scaler->scale(terms.total / s.divisor).backward();
  };
  const auto state = [this] {
    std::vector<at::Tensor> tensors = net_.model().module->buffers();
    for (const auto& p : net_.model().module->parameters()) {
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
  if (graphs_.training->will_replay(key)) phase.emplace(hooks_, Phase::forward);  // the graph holds forward, loss and backward
  return graphs_.training->micro_step(step) ? static_->outputs : eager_terms;
}

models::LossTerms EagerStepRunner::run(const at::Tensor& input, const models::TargetBatch& targets, double loss_divisor) {
  if (graphs_.training && graphs_.training->graphs_loss()) return graphed(input, targets, loss_divisor);
  return eager(input, targets, loss_divisor);
}

void EagerStepRunner::begin_window() {
  const bool graphed_gradients = graphs_.training && (graphs_.training->graphs_optimizer() || graphs_.training->graphs_loss());
  optim_.optimizer->zero_grad(/*set_to_none=*/!graphed_gradients);
}

// The capturable optimizer reads its lr and momentum from device tensors (staged here, eagerly),
// so under cuda_graph_scope=step the rest is one graph: no host sync, no per-tensor launches.
void EagerStepRunner::optimizer_step(TrainState& state) {
  hooks_.after_backward(state);
  {
    const auto phase = hooks_.phase(Phase::optimizer);
    auto& optimizer = dynamic_cast<CapturableOptimizer&>(*optim_.optimizer);
    const auto stage = [&] {
      hooks_.before_optimizer_step(state);
      optimizer.stage();
      if (net_.ema) net_.ema->stage();
    };
    const bool graphed_ema = graphs_.training && graphs_.training->graphs_ema();
    const auto work = [this, graphed_ema] {
      precision_.scaler->begin_step();
      if (optim_.clip > 0) {
        precision_.scaler->unscale(*optim_.optimizer);
        std::vector<at::Tensor> grads;
        for (const auto& p : net_.model().module->parameters()) if (p.grad().defined()) grads.push_back(p.grad());
        clip_gradients(grads, optim_.clip);
      }
      precision_.scaler->step(*optim_.optimizer, /*stage=*/false);
      precision_.scaler->update();
      if (net_.ema && graphed_ema) net_.ema->apply(*net_.model().module);
    };
    if (graphs_.training) graphs_.training->optimizer_step(stage, work);
    else {
      stage();
      work();
    }
    if (net_.ema && !graphed_ema) net_.ema->apply(*net_.model().module);
  }
  state.record_step();
  optim_.apply_schedule(state.schedule_iteration());
}

void EagerStepRunner::state_replaced(const std::string& reason) {
  if (graphs_.training) graphs_.training->invalidate(reason);
}

NetworkFunction EagerStepRunner::validation_network(models::Model& model) {
  NetworkFunction network = [this, &model](const at::Tensor& x) {
    AutocastGuard guard(device_.type(), precision_.amp_dtype, precision_.autocast && device_.is_cuda(), /*cache=*/!graphs_.validation);
    return model.forward(x);
  };
  if (!graphs_.validation) return network;
  return [this, network](const at::Tensor& x) { return graphs_.validation->forward(x, network); };  // a graph per recurring batch shape
}

void EagerStepRunner::end_validation() {
  InferenceGraphs* graphs = graphs_.validation.get();
  if (!graphs) return;
  if (!validation_graphs_logged_ && graphs->captures() > 0) {
    log::info("cuda_graph: validation replays {} of {} batches from {} graphs (one per recurring batch shape)",
              graphs->replays(), graphs->replays() + graphs->eager(), graphs->captures());
    validation_graphs_logged_ = true;
  }
  graphs->reset();  // their memory goes back to training
}

// How much of the run the graphs carried (batches of other shapes, the first ones, run eager).
std::string EagerStepRunner::graph_summary() const {
  if (!graphs_.training) return {};
  const GraphManager& g = *graphs_.training;
  const GraphManager::Counts& c = g.counts();
  std::vector<std::string> parts;
  if (c.step_replays + c.step_eager > 0) {
    parts.push_back(fmt::format("{} of {} batches replayed from the step graph", c.step_replays, c.step_replays + c.step_eager));
  }
  if (c.replays + c.eager + c.eager_after_capture > 0) {
    parts.push_back(fmt::format("{} of {} network passes replayed", c.replays, c.replays + c.eager + c.eager_after_capture));
  }
  if (c.optimizer_replays + c.optimizer_eager + c.optimizer_captures > 0 && g.graphs_optimizer()) {
    parts.push_back(fmt::format("{} of {} optimizer steps replayed", c.optimizer_replays,
                                c.optimizer_replays + c.optimizer_eager + c.optimizer_captures));
  }
  if (g.disabled()) parts.push_back("then disabled: " + *g.disabled_reason());
  return fmt::format("{}", fmt::join(parts, "; "));
}

}  // namespace libreyolo::train
