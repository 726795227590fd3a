// CUDA-graph training: the network's forward and backward (LibreYOLO's boundary) and, past it, the
// optimizer step (cuda_graph_scope=step), in three parts:
//
//  - CaptureBackend: what a graph does (capture a piece of work, replay it, drop it). The CUDA
//    build implements it on at::cuda::CUDAGraph (cuda_graph_backend.cpp): warm-up on a side
//    stream, thread-local capture mode (a pinned-memory allocation in a loader thread cannot break
//    the capture), forward and backward graphs in one private memory pool. The tests use a fake
//    that runs the captured work again at each replay, so everything below runs on the CPU.
//  - GraphedNetwork: make_graphed_callables for LibTorch C++. A static input, a forward graph
//    whose outputs are static tensors, a backward graph from static output gradients to static
//    parameter gradients, and an autograd function that replays them, so the loss and the
//    optimizer stay eager on top. The gradients it hands to autograd are fresh tensors, never the
//    static ones: autograd adopts a tensor it is given as a parameter's first .grad, and the next
//    replay would overwrite it (under accumulation g0 + g1 would become 2 g1).
//  - GraphManager: LibreYOLO's policy. Capture on the 3rd occurrence of an input shape, after 3
//    warm-up runs, with the BatchNorm buffers snapshotted and restored around them; at most one
//    graph per run, other shapes run eager; a capture or replay failure turns the run eager for
//    good with one warning; invalidate() drops the graph and counts shapes again (YOLOX's L1 branch
//    at no_aug_epochs). The optimizer step's graph (unscale, clipping, the capturable optimizer's
//    masked update, the loss scale's update, EMA) follows the same rules: its hyperparameters are
//    staged into device tensors before every replay, so the schedule needs no re-capture.
#pragma once

#include <ATen/Tensor.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace libreyolo::train {

class CaptureBackend {
 public:
  virtual ~CaptureBackend() = default;
  // Runs `work` once, eagerly, where captures run (a side stream): the warm-up before capture.
  virtual void warm_up(const std::function<void()>& work) = 0;
  // Captures one run of `work` and returns the graph's handle. Graphs captured before the next
  // reset() share one memory pool. Throws when capture fails.
  virtual std::size_t capture(const std::function<void()>& work) = 0;
  virtual void replay(std::size_t graph) = 0;  // throws when the replay fails
  virtual void reset() = 0;                    // drops every graph and the pool
  virtual std::uint64_t pool_bytes() const = 0;  // memory the graphs hold (reported in GPU_mem)
  // Whether capture() also carries out the work's effects. CUDA's capture only records kernels
  // (the first replay does the work); a re-running backend runs it while "capturing".
  virtual bool capture_has_effects() const { return false; }
};

// A backend without a GPU: "capturing" keeps the work and each replay runs it again, eagerly.
// Everything around it (the static tensors, the autograd function, the manager, a DDP reducer's
// hooks) then runs for real on the CPU: the tests check the graphed path with it. Like CUDA's, its
// capture fails when the work calls an operator that reads the device from the host (host_reads.h).
class RerunBackend : public CaptureBackend {
 public:
  void warm_up(const std::function<void()>& work) override { work(); }
  std::size_t capture(const std::function<void()>& work) override;
  void replay(std::size_t graph) override { works_.at(graph)(); }
  void reset() override { works_.clear(); }
  std::uint64_t pool_bytes() const override { return 0; }
  bool capture_has_effects() const override { return true; }

 private:
  std::vector<std::function<void()>> works_;
};

class HostReadWatch;
// A failed capture's reason when `watch` heard host reads: which operators, how often.
std::string host_read_refusal(const HostReadWatch& watch);

// The backend of this build for `device`: CUDA graphs on a CUDA device; null where there is none
// (a CPU device or a build without CUDA), with the reason.
std::unique_ptr<CaptureBackend> make_cuda_graph_backend(int device, std::string& why_not);

// cuda_graph=true on a CUDA device: the calling thread's work moves from the legacy default stream
// to a stream of its own, after the device has finished what is queued, until the returned guard
// goes (then the device finishes that stream's work and the thread's stream is restored). PyTorch's
// rule for capturing a backward: the autograd nodes that outlive a step (a parameter's
// AccumulateGrad, made at its first eager step) run on the stream they were made on, so the steps
// before a capture must run on the capture's stream; on the legacy stream, CUDA refuses the
// capture ("operation would make the legacy stream depend on a capturing blocking stream"). The
// backends capture on the thread's current stream when it is not the default one. Null without
// CUDA.
std::shared_ptr<void> use_capture_stream(int device);

// Tests: a backend for CPU devices (a fake that re-runs the captured work), so that the trainer's
// graphed path runs end to end on the CPU. Process-wide; empty (the default) means none.
void set_cpu_capture_backend_for_tests(std::function<std::unique_ptr<CaptureBackend>()> factory);
std::unique_ptr<CaptureBackend> make_cpu_capture_backend_for_tests();  // null unless one was set
// Tests: training on the CPU takes the forms a GPU captures (the loss's static shapes, the
// optimizer's and EMA's device tensors) with or without graphs, so that an eager run and a graphed
// one differ only in the graphs. Process-wide; off by default.
void set_device_forms_for_tests(bool on);
bool device_forms_for_tests();

// What a graph is keyed on: a tensor's sizes, type and device (a captured graph replays only for
// the same).
std::vector<std::int64_t> shape_key(const at::Tensor& tensor);

// A network as a function of one input tensor: its outputs flattened to a list.
using NetworkFunction = std::function<std::vector<at::Tensor>(const at::Tensor& input)>;

class GraphedNetwork {
 public:
  // Captures `network` at `sample`'s shape: `warmup` forward+backward runs, then the forward and
  // the backward graph. `parameters`: those the backward graph differentiates (requires_grad).
  GraphedNetwork(CaptureBackend& backend, NetworkFunction network, std::vector<at::Tensor> parameters, const at::Tensor& sample,
                 int warmup);
  // The outputs for `input` (the captured shape): replays the forward graph; their backward
  // replays the backward graph and accumulates into the parameters' .grad like eager autograd.
  std::vector<at::Tensor> operator()(const at::Tensor& input);

  struct Static;  // the graphs' fixed tensors and handles

 private:
  std::shared_ptr<Static> static_;
};

// What a capture needs besides the network: the parameters its backward differentiates
// (requires_grad) and the module's buffers (BatchNorm statistics, restored after warm-up and capture).
struct CaptureTensors {
  std::vector<at::Tensor> parameters, buffers;
};

// cuda_graph_scope, cumulative: network (the forward and backward, LibreYOLO's boundary) < loss
// (forward, loss and backward as one graph) < optimizer (the optimizer step as a second graph:
// unscale, clipping, the update, the loss scale) < step (the EMA update in it too).
struct GraphOptions {
  int capture_after = 3;  // capture on this occurrence of an input shape (of an optimizer step)
  int warmup = 3;         // warm-up runs before capture
  bool loss = false, optimizer = false, ema = false;
};

// The micro-step as one graph (cuda_graph_scope=loss and up): the network, the loss and the
// backward into the parameters' .grad, at one static shape.
struct MicroStepWork {
  std::vector<std::int64_t> key;   // the batch's static shape (input sizes and type, target slots)
  std::function<std::string()> describe;  // the same for the capture's log line ("4x3x640x640, 300 label slots")
  std::function<void()> load;      // eager: this batch into the static tensors `work` reads
  std::function<void()> work;      // the step from the static tensors, its results into static outputs
  std::function<void()> eager;     // the same step from the batch itself (no static tensors)
  // What warm-up and capture must leave as they found it: the BatchNorm buffers and the gradients.
  std::function<std::vector<at::Tensor>()> state;
};

class GraphManager {
 public:
  GraphManager(std::unique_ptr<CaptureBackend> backend, GraphOptions options = {});

  // The network's outputs for `input`: eager (`network` itself) until the shape is seen
  // `capture_after` times, then replayed from the graph for that shape; other shapes stay eager.
  // `capture_tensors` is called only when a capture happens (not on every step).
  std::vector<at::Tensor> forward(const at::Tensor& input, const NetworkFunction& network,
                                  const std::function<CaptureTensors()>& capture_tensors);

  // One micro-step through the step graph: eager (`eager`) until the key is seen capture_after
  // times, then captured (warm-ups and capture leave `state` as they found it) and replayed for
  // that key; other keys stay eager. Returns true when the graph ran it (results in the static
  // outputs). A failure turns the run eager, like the network graph's.
  bool micro_step(const MicroStepWork& step);
  bool graphs_loss() const { return options_.loss && !disabled_; }
  bool will_replay(const std::vector<std::int64_t>& key) const { return graphs_loss() && step_graph_ && key == step_key_; }

  // One optimizer step. With options.optimizer: `stage` runs eagerly every time (it writes the
  // schedule's lr, momentum and EMA decay into device tensors); `work` (which reads only device
  // tensors) runs eagerly for the first capture_after − 1 steps, then on the side stream as the
  // warm-up, is captured on the next and replayed from then on. Without it, or once graphs are
  // disabled, both simply run.
  void optimizer_step(const std::function<void()>& stage, const std::function<void()>& work);
  bool graphs_optimizer() const { return options_.optimizer && !disabled_; }
  bool graphs_ema() const { return options_.ema && graphs_optimizer(); }
  // The loss cannot be captured in this run (a family's data-dependent shapes, data-parallel
  // collectives): the network graph is used instead, the optimizer's is kept.
  void keep_loss_eager() { options_.loss = false; }

  // Drops the graphs; shapes and optimizer steps are counted again. Logs "cuda_graph: capture invalidated (<reason>); will re-capture".
  void invalidate(const std::string& reason);

  bool disabled() const { return disabled_.has_value(); }
  const std::optional<std::string>& disabled_reason() const { return disabled_; }
  bool captured() const { return graph_.has_value(); }
  std::uint64_t pool_bytes() const { return backend_ ? backend_->pool_bytes() : 0; }
  struct Counts {
    std::int64_t eager = 0, captures = 0, replays = 0, eager_after_capture = 0;
    std::int64_t optimizer_eager = 0, optimizer_captures = 0, optimizer_replays = 0;
    std::int64_t step_eager = 0, step_captures = 0, step_replays = 0;
  };
  const Counts& counts() const { return counts_; }

 private:
  void disable(const std::string& reason);
  // The graph's outputs for `input`; on failure the run turns eager ("<failure>: <why>").
  std::vector<at::Tensor> replay(const at::Tensor& input, const NetworkFunction& network, const char* failure);

  std::unique_ptr<CaptureBackend> backend_;
  GraphOptions options_;
  std::map<std::vector<std::int64_t>, int> seen_;
  std::optional<GraphedNetwork> graph_;
  std::vector<std::int64_t> graph_shape_;
  std::optional<std::string> disabled_;
  int optimizer_steps_seen_ = 0;
  std::map<std::vector<std::int64_t>, int> step_seen_;
  std::optional<std::size_t> step_graph_;
  std::vector<std::int64_t> step_key_;
  std::optional<std::size_t> optimizer_graph_;
  Counts counts_;
};

// Validation's inference graphs: one per input shape of the rectangular validation plan, each
// captured on its `capture_after`-th batch (after a warm-up) and replayed for the rest, so a
// shape the plan holds once or twice runs eager (a capture would not pay). All share one memory
// pool: a graph's outputs are valid until the next replay of any graph, and the validator decodes
// each batch before the next. Failure turns the rest of the validation eager. reset() drops them
// all (after each validation: their memory goes back to training).
class InferenceGraphs {
 public:
  explicit InferenceGraphs(std::unique_ptr<CaptureBackend> backend, int capture_after = 3);
  std::vector<at::Tensor> forward(const at::Tensor& input, const NetworkFunction& network);
  void reset();  // also the counts below (since the last reset)
  std::int64_t captures() const { return captures_; }
  std::int64_t replays() const { return replays_; }
  std::int64_t eager() const { return eager_; }

 private:
  struct Graph {
    at::Tensor input;
    std::vector<at::Tensor> outputs;
    std::size_t handle = 0;
  };
  std::unique_ptr<CaptureBackend> backend_;
  int capture_after_;
  std::map<std::vector<std::int64_t>, int> seen_;
  std::map<std::vector<std::int64_t>, std::unique_ptr<Graph>> graphs_;
  bool failed_ = false;
  std::int64_t captures_ = 0, replays_ = 0, eager_ = 0;
};

// Why cuda_graph=true cannot be honoured for this run, or nullopt when it can. The line
// "cuda_graph=true ignored (<reason>); training runs eager." is logged by the caller.
struct GraphGateInputs {
  bool cuda_device = false;
  bool backend_available = false;
  std::string backend_missing_reason;
  bool family_supported = true;
  std::string family;
};
std::optional<std::string> graph_gate_reason(const GraphGateInputs& inputs);

}  // namespace libreyolo::train
