// Trainer hooks: the points of the loop where optional features attach (the profiler, a signal
// stop, later a gradient reducer and a CUDA-graph step runner) without the loop naming them.
// A hook overrides what it needs; HookList calls every hook in registration order. Hooks see
// the train state read-only; what they may change is narrow: a stop request, checkpoint extras,
// the result object.
#pragma once

#include "train/train_state.h"

#include <c10/core/Device.h>
#include <torch/nn/module.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace libreyolo::models {
struct Checkpoint;
}

namespace libreyolo::train {

// What the run is, for hooks that describe it (the profiler's metadata).
struct RunInfo {
  c10::Device device = c10::kCPU;
  std::string model_name;  // "YOLOv9-t"
  int batch = 0;
  int image_size = 0;
  bool autocast = false;
  std::string amp_dtype;
  std::optional<double> cpu_bf16_speedup;  // float32's time over bfloat16's for a convolution here, where measured
  int workers = 0;
  std::filesystem::path run_dir;
  // The trained network, for hooks that work on its parameters or gradients (a gradient reducer).
  torch::nn::Module* model = nullptr;
  // Some parameters may get no gradient in a step (RT-DETR's denoising embedding on a batch without
  // targets): a gradient reducer then finds them from the loss (before_backward).
  bool may_leave_parameters_unused = false;
};

// The timed parts of one micro-step, in order.
enum class Phase { to_device, forward, backward, optimizer };
const char* phase_name(Phase phase);

struct StopRequest {
  enum class Kind {
    interrupt,  // save last.pt at the end of the accumulation window, then end with `exit_code`
    finish,     // end now without a checkpoint (the partial epoch is not kept), as `state`
  };
  Kind kind = Kind::interrupt;
  int exit_code = 0;
  std::string state;    // status.json's state: "interrupted", "profiled"
  std::string message;  // logged once when the stop is carried out
};

class TrainHook {
 public:
  virtual ~TrainHook() = default;
  virtual void on_train_start(const RunInfo&, const TrainState&) {}
  virtual void before_fetch() {}                 // around the loader's next(): the data wait
  virtual void after_fetch(bool /*got_batch*/) {}
  virtual void on_step_start(const TrainState&) {}            // a batch is in hand, before to_device
  virtual void on_phase_start(Phase) {}
  virtual void on_phase_end(Phase) {}
  virtual void before_backward(const at::Tensor& /*loss*/) {}  // the scaled loss of a micro-step, in phase backward (eager steps)
  virtual void after_backward(const TrainState&) {}         // a whole accumulation window's gradients are ready
  virtual void before_optimizer_step(const TrainState&) {}  // before unscale, clipping and the update (eager, graphed or not)
  virtual void on_step_end(const TrainState&) {}            // after every micro-step (loader batch)
  virtual std::optional<StopRequest> should_stop(const TrainState&) { return std::nullopt; }
  virtual void on_epoch_end(const TrainState&) {}           // after validation and the checkpoints
  virtual void on_checkpoint(const TrainState&, models::Checkpoint&) {}  // add extras before it is written
  virtual void on_train_end(const TrainState&, nlohmann::ordered_json& /*result*/) {}
};

class HookList {
 public:
  void add(std::unique_ptr<TrainHook> hook) { hooks_.push_back(std::move(hook)); }
  bool empty() const { return hooks_.empty(); }

  void on_train_start(const RunInfo& i, const TrainState& s) { for (auto& h : hooks_) h->on_train_start(i, s); }
  void before_fetch() { for (auto& h : hooks_) h->before_fetch(); }
  void after_fetch(bool got_batch) { for (auto& h : hooks_) h->after_fetch(got_batch); }
  void on_step_start(const TrainState& s) { for (auto& h : hooks_) h->on_step_start(s); }
  void before_backward(const at::Tensor& loss) { for (auto& h : hooks_) h->before_backward(loss); }
  void after_backward(const TrainState& s) { for (auto& h : hooks_) h->after_backward(s); }
  void before_optimizer_step(const TrainState& s) { for (auto& h : hooks_) h->before_optimizer_step(s); }
  void on_step_end(const TrainState& s) { for (auto& h : hooks_) h->on_step_end(s); }
  void on_epoch_end(const TrainState& s) { for (auto& h : hooks_) h->on_epoch_end(s); }
  void on_checkpoint(const TrainState& s, models::Checkpoint& c) { for (auto& h : hooks_) h->on_checkpoint(s, c); }
  void on_train_end(const TrainState& s, nlohmann::ordered_json& r) { for (auto& h : hooks_) h->on_train_end(s, r); }
  // The first hook that asks to stop wins.
  std::optional<StopRequest> should_stop(const TrainState& s) {
    for (auto& h : hooks_) {
      if (auto request = h->should_stop(s)) return request;
    }
    return std::nullopt;
  }

  // Marks a phase for its lifetime.
  class PhaseScope {
   public:
    PhaseScope(HookList& hooks, Phase phase) : hooks_(hooks), phase_(phase) {
      for (auto& h : hooks_.hooks_) h->on_phase_start(phase_);
    }
    ~PhaseScope() {
      for (auto& h : hooks_.hooks_) h->on_phase_end(phase_);
    }
    PhaseScope(const PhaseScope&) = delete;
    PhaseScope& operator=(const PhaseScope&) = delete;

   private:
    HookList& hooks_;
    Phase phase_;
  };
  PhaseScope phase(Phase phase) { return PhaseScope(*this, phase); }

 private:
  std::vector<std::unique_ptr<TrainHook>> hooks_;
};

}  // namespace libreyolo::train
