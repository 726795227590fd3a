#include "train/cuda_graph.h"

#include "core/log.h"
#include "train/host_reads.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/custom_class.h>

namespace libreyolo::train {

// What the two graphs read and write. Everything here keeps its storage for the graphs' life:
// the forward graph reads `input` and writes `outputs`; the backward graph reads `grad_outputs`
// and writes `grads`.
struct GraphedNetwork::Static {
  CaptureBackend* backend = nullptr;
  NetworkFunction network;
  std::vector<at::Tensor> parameters;
  at::Tensor input;
  std::vector<at::Tensor> outputs;
  std::vector<bool> differentiable;  // which outputs carry a gradient
  std::vector<at::Tensor> grad_outputs;  // one per differentiable output
  std::vector<at::Tensor> grads;         // one per parameter; undefined for an unused one
  std::vector<at::Tensor> live_outputs;  // the last forward's own outputs, with their autograd graph
  std::size_t forward_graph = 0, backward_graph = 0;
  enum class Run { warmup, capture, replay } run = Run::warmup;

  void forward_work() {
    const at::AutoGradMode grad_mode(true);  // a re-running backend replays inside the autograd function's no-grad forward
    std::vector<at::Tensor> outs = network(input);
    if (run == Run::capture) {
      outputs = outs;  // captured: these tensors are what the graph writes
      differentiable.clear();
      for (const auto& o : outs) differentiable.push_back(o.requires_grad());
    } else if (run == Run::replay) {
      // Only a backend that re-runs the work (the tests' fake) gets here; a CUDA graph replays kernels.
      for (std::size_t i = 0; i < outs.size(); ++i) outputs[i].copy_(outs[i].detach());
    }
    live_outputs = std::move(outs);
  }

  void backward_work() {
    std::vector<at::Tensor> with_grad, seeds;
    for (std::size_t i = 0, k = 0; i < live_outputs.size(); ++i) {
      if (!live_outputs[i].requires_grad()) continue;
      with_grad.push_back(live_outputs[i]);
      seeds.push_back(run == Run::warmup ? at::ones_like(live_outputs[i]) : grad_outputs[k++]);
    }
    std::vector<at::Tensor> computed;
    if (!with_grad.empty()) {
      computed = torch::autograd::grad(with_grad, parameters, seeds, /*retain_graph=*/false, /*create_graph=*/false,
                                       /*allow_unused=*/true);
    }
    live_outputs.clear();  // the autograd graph goes with them
    if (run == Run::capture) {
      grads = computed;
      grads.resize(parameters.size());
    } else if (run == Run::replay) {
      for (std::size_t j = 0; j < grads.size() && j < computed.size(); ++j) {
        if (grads[j].defined() && computed[j].defined()) grads[j].copy_(computed[j]);
      }
    }
  }
};

std::vector<std::int64_t> shape_key(const at::Tensor& tensor) {
  std::vector<std::int64_t> key(tensor.sizes().begin(), tensor.sizes().end());
  key.push_back(static_cast<std::int64_t>(tensor.scalar_type()));
  key.push_back(tensor.device().index());
  return key;
}

namespace {

// Copies of tensors that warm-up and capture change (BatchNorm statistics, gradients), put back
// in place afterwards so that the run matches eager.
class Snapshot {
 public:
  explicit Snapshot(std::vector<at::Tensor> tensors) : tensors_(std::move(tensors)) {
    for (const auto& t : tensors_) saved_.push_back(t.detach().clone());
  }
  void restore() const {
    at::NoGradGuard no_grad;
    for (std::size_t i = 0; i < saved_.size(); ++i) tensors_[i].detach().copy_(saved_[i]);
  }

 private:
  std::vector<at::Tensor> tensors_, saved_;
};

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The graphs, kept alive by the autograd graph that will replay the backward (an IValue capsule).
struct Holder : torch::CustomClassHolder {
  std::shared_ptr<GraphedNetwork::Static> graphs;
};

// Replays the forward graph in forward, the backward graph in backward.
struct GraphedFunction : torch::autograd::Function<GraphedFunction> {
  static variable_list forward(AutogradContext* ctx, const at::Tensor& input, at::TensorList parameters,
                               const std::shared_ptr<GraphedNetwork::Static>& graphs) {
    (void)parameters;  // inputs of the node, so that their AccumulateGrad (and a DDP reducer's hooks) run
    GraphedNetwork::Static& s = *graphs;
    s.input.copy_(input);
    s.backend->replay(s.forward_graph);
    auto holder = c10::make_intrusive<Holder>();
    holder->graphs = graphs;
    ctx->saved_data["graphs"] = at::IValue::make_capsule(c10::static_intrusive_pointer_cast<torch::CustomClassHolder>(holder));
    variable_list outputs;
    for (const auto& o : s.outputs) outputs.push_back(o.detach());  // views of the static outputs
    for (std::size_t i = 0; i < outputs.size(); ++i) {
      if (!s.differentiable[i]) ctx->mark_non_differentiable({outputs[i]});
    }
    return outputs;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto holder = c10::static_intrusive_pointer_cast<Holder>(ctx->saved_data["graphs"].toCapsule());
    GraphedNetwork::Static& s = *holder->graphs;
    for (std::size_t i = 0, k = 0; i < grad_outputs.size(); ++i) {
      if (!s.differentiable[i]) continue;
      if (grad_outputs[i].defined()) {
        s.grad_outputs[k].copy_(grad_outputs[i]);
      } else {
        s.grad_outputs[k].zero_();
      }
      ++k;
    }
    s.backend->replay(s.backward_graph);
    variable_list result{at::Tensor()};  // the input image needs no gradient; then one per parameter, then the graphs (none)
    // Fresh tensors: autograd adopts a gradient nothing else holds as the parameter's .grad, and a
    // detached alias of the static one would be overwritten by the next replay (under
    // accumulation g0 + g1 would become 2 g1; the tests check it).
    for (const auto& g : s.grads) result.push_back(g.defined() ? g.clone() : at::Tensor());
    result.emplace_back();
    return result;
  }
};

}  // namespace

GraphedNetwork::GraphedNetwork(CaptureBackend& backend, NetworkFunction network, std::vector<at::Tensor> parameters,
                               const at::Tensor& sample, int warmup)
    : static_(std::make_shared<Static>()) {
  Static& s = *static_;
  s.backend = &backend;
  s.network = std::move(network);
  s.parameters = std::move(parameters);
  s.input = sample.detach().clone();
  s.run = Static::Run::warmup;
  Static* graphs = static_.get();  // the work outlives this constructor in a backend that re-runs it
  for (int i = 0; i < warmup; ++i) {
    backend.warm_up([graphs] {
      graphs->forward_work();
      graphs->backward_work();
    });
  }
  s.run = Static::Run::capture;
  s.forward_graph = backend.capture([graphs] { graphs->forward_work(); });
  for (std::size_t i = 0; i < s.outputs.size(); ++i) {
    if (s.differentiable[i]) s.grad_outputs.push_back(at::zeros_like(s.outputs[i]));
  }
  s.backward_graph = backend.capture([graphs] { graphs->backward_work(); });
  s.run = Static::Run::replay;
}

std::vector<at::Tensor> GraphedNetwork::operator()(const at::Tensor& input) {
  return GraphedFunction::apply(input, at::TensorList(static_->parameters), static_);
}

GraphManager::GraphManager(std::unique_ptr<CaptureBackend> backend, GraphOptions options)
    : backend_(std::move(backend)), options_(options) {}

void GraphManager::disable(const std::string& reason) {
  log::warn("cuda_graph training capture disabled, falling back to eager: {}", reason);
  disabled_ = reason;
  graph_.reset();
  optimizer_graph_.reset();
  step_graph_.reset();
  try {
    backend_->reset();
  } catch (const std::exception&) {  // the reason above is what the user needs
  }
}

void GraphManager::invalidate(const std::string& reason) {
  if (disabled_) return;
  seen_.clear();
  step_seen_.clear();
  optimizer_steps_seen_ = 0;
  if (!graph_ && !optimizer_graph_ && !step_graph_) return;
  graph_.reset();
  optimizer_graph_.reset();
  step_graph_.reset();
  backend_->reset();
  log::info("cuda_graph: capture invalidated ({}); will re-capture", reason);
}

std::vector<at::Tensor> GraphManager::forward(const at::Tensor& input, const NetworkFunction& network,
                                              const std::function<CaptureTensors()>& capture_tensors) {
  if (disabled_) {
    ++counts_.eager;
    return network(input);
  }
  const std::vector<std::int64_t> key = shape_key(input);
  if (graph_) {
    if (key != graph_shape_) {  // a last partial batch, another multi_scale size: eager, the graph stays
      ++counts_.eager_after_capture;
      return network(input);
    }
    return replay(input, network, "graph replay failed");
  }
  if (++seen_[key] < options_.capture_after) {
    ++counts_.eager;
    return network(input);
  }
  // Warm-up and capture run the network without training on the batch: its BatchNorm statistics
  // come back as they were, so that the run matches eager.
  const CaptureTensors tensors = capture_tensors();
  std::optional<Snapshot> buffers;
  try {
    buffers.emplace(tensors.buffers);
    graph_.emplace(*backend_, network, tensors.parameters, input, options_.warmup);
    graph_shape_ = key;
    ++counts_.captures;
  } catch (const std::exception& error) {
    graph_.reset();
    if (buffers) buffers->restore();
    disable(fmt::format("graph capture failed: {}", error.what()));
    ++counts_.eager;
    return network(input);
  }
  buffers->restore();
  log::info("cuda_graph: captured training forward/backward at input shape {}", fmt::join(input.sizes(), "x"));
  return replay(input, network, "first graph replay failed");
}

bool GraphManager::micro_step(const MicroStepWork& step) {
  const auto eager = [&] {
    ++counts_.step_eager;
    step.eager();
    return false;
  };
  if (!graphs_loss()) return eager();
  if (step_graph_) {
    if (step.key != step_key_) return eager();  // a last partial batch, another multi_scale size
    try {
      step.load();
      backend_->replay(*step_graph_);
      ++counts_.step_replays;
      return true;
    } catch (const std::exception& error) {
      disable(fmt::format("step graph replay failed: {}", error.what()));
      return eager();
    }
  }
  if (++step_seen_[step.key] < options_.capture_after) return eager();
  std::optional<Snapshot> state;
  try {
    state.emplace(step.state());
    step.load();
    for (int i = 0; i < options_.warmup; ++i) backend_->warm_up(step.work);
    step_graph_ = backend_->capture(step.work);
    step_key_ = step.key;
    ++counts_.step_captures;
    state->restore();  // warm-ups (and a re-running backend's capture) trained on this batch: undone
    log::info("cuda_graph: captured the training step (forward, loss, backward) at {}", step.describe());
    backend_->replay(*step_graph_);
    ++counts_.step_replays;
    return true;
  } catch (const std::exception& error) {
    step_graph_.reset();
    if (state) state->restore();
    disable(fmt::format("step graph capture failed: {}", error.what()));
    return eager();
  }
}

void GraphManager::optimizer_step(const std::function<void()>& stage, const std::function<void()>& work) {
  stage();
  if (!graphs_optimizer()) {
    ++counts_.optimizer_eager;
    return work();
  }
  if (!optimizer_graph_) {
    const int step = ++optimizer_steps_seen_;
    if (step < options_.capture_after - 1) {
      ++counts_.optimizer_eager;
      return work();
    }
    if (step == options_.capture_after - 1) {  // a real step, on the stream captures run on
      ++counts_.optimizer_eager;
      return backend_->warm_up(work);
    }
    try {
      optimizer_graph_ = backend_->capture(work);
      ++counts_.optimizer_captures;
    } catch (const std::exception& error) {
      disable(fmt::format("optimizer step capture failed: {}", error.what()));
      ++counts_.optimizer_eager;
      return work();  // a failed CUDA capture ran nothing
    }
    log::info("cuda_graph: captured the optimizer step (unscale, clipping, update, loss scale{})", options_.ema ? ", EMA" : "");
    if (backend_->capture_has_effects()) return;
  }
  try {
    backend_->replay(*optimizer_graph_);
    ++counts_.optimizer_replays;
  } catch (const std::exception& error) {
    disable(fmt::format("optimizer step replay failed: {}", error.what()));
    ++counts_.optimizer_eager;
    work();
  }
}

std::vector<at::Tensor> GraphManager::replay(const at::Tensor& input, const NetworkFunction& network, const char* failure) {
  try {
    auto outputs = (*graph_)(input);
    ++counts_.replays;
    return outputs;
  } catch (const std::exception& error) {
    disable(fmt::format("{}: {}", failure, error.what()));
    ++counts_.eager;
    return network(input);
  }
}

InferenceGraphs::InferenceGraphs(std::unique_ptr<CaptureBackend> backend, int capture_after)
    : backend_(std::move(backend)), capture_after_(capture_after) {}

void InferenceGraphs::reset() {
  graphs_.clear();
  seen_.clear();
  failed_ = false;
  captures_ = replays_ = eager_ = 0;
  try {
    backend_->reset();
  } catch (const std::exception& error) {
    log::warn("cuda_graph: dropping the validation graphs failed: {}", error.what());
  }
}

std::vector<at::Tensor> InferenceGraphs::forward(const at::Tensor& input, const NetworkFunction& network) {
  const std::vector<std::int64_t> key = shape_key(input);
  const auto eager = [&] {
    ++eager_;
    return network(input);
  };
  if (failed_) return eager();
  try {
    if (const auto found = graphs_.find(key); found != graphs_.end()) {
      Graph& g = *found->second;
      g.input.copy_(input);
      backend_->replay(g.handle);
      ++replays_;
      return g.outputs;
    }
    if (++seen_[key] < capture_after_) return eager();
    auto graph = std::make_unique<Graph>();
    Graph* g = graph.get();
    g->input = input.clone();
    const auto work = [g, network] { g->outputs = network(g->input); };  // kept: re-run at each replay by a re-running backend
    backend_->warm_up(work);
    g->handle = backend_->capture(work);
    backend_->replay(g->handle);
    graphs_.emplace(key, std::move(graph));
    ++captures_;
    ++replays_;
    return g->outputs;
  } catch (const std::exception& error) {
    log::warn("cuda_graph: validation graph failed, validating eager: {}", error.what());
    failed_ = true;
    graphs_.clear();
    try {
      backend_->reset();
    } catch (const std::exception&) {  // the warning above is what the user needs
    }
    return eager();
  }
}

std::size_t RerunBackend::capture(const std::function<void()>& work) {
  {
    const HostReadWatch watch;
    work();  // a capture runs the host code once, as CUDA's does
    // and refuses what CUDA's would (unlike CUDA's failed capture, this one has run the work)
    if (!watch.empty()) throw std::runtime_error(host_read_refusal(watch));
  }
  works_.push_back(work);
  return works_.size() - 1;
}

namespace {
std::function<std::unique_ptr<CaptureBackend>()> cpu_backend_for_tests;
bool device_forms_on = false;
}  // namespace

void set_device_forms_for_tests(bool on) { device_forms_on = on; }
bool device_forms_for_tests() { return device_forms_on; }

void set_cpu_capture_backend_for_tests(std::function<std::unique_ptr<CaptureBackend>()> factory) {
  cpu_backend_for_tests = std::move(factory);
}

std::unique_ptr<CaptureBackend> make_cpu_capture_backend_for_tests() {
  return cpu_backend_for_tests ? cpu_backend_for_tests() : nullptr;
}

std::string host_read_refusal(const HostReadWatch& watch) {
  return fmt::format("the captured work reads the device from the host ({}), which a CUDA graph cannot hold", watch.summary());
}

std::optional<std::string> graph_gate_reason(const GraphGateInputs& in) {
  if (!in.cuda_device) return std::string("device is not CUDA");
  if (!in.backend_available) return in.backend_missing_reason.empty() ? std::string("no CUDA-graph backend") : in.backend_missing_reason;
  if (!in.family_supported) return fmt::format("{} does not support training capture", in.family);
  return std::nullopt;
}

}  // namespace libreyolo::train
