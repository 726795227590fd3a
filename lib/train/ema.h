// Exponential moving average of a model's weights (YOLOX/timm ModelEMA as LibreYOLO uses it):
// after each optimizer step, every floating state entry (parameters and BatchNorm statistics)
// moves to d·ema + (1 − d)·model with d = decay·(1 − exp(−updates/tau)) (constant when tau ≤ 0).
#pragma once

#include <ATen/Tensor.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace libreyolo::train {

class ModelEma {
 public:
  // `ema_model` is a separate instance of the same architecture; its weights start as the model's.
  ModelEma(torch::nn::Module& model, std::shared_ptr<torch::nn::Module> ema_model, double decay, double tau,
           std::int64_t updates = 0);
  // stage() then apply(model): one update.
  void update(torch::nn::Module& model);
  // Eager, before each update (or its graph's replay): counts the update and puts its decay into
  // device tensors.
  void stage();
  // The update from those tensors only (capturable): ema = d·ema + (1 − d)·model.
  void apply(torch::nn::Module& model);
  // On the CPU apply() reads the staged 1 − d back (for its faster per-tensor form); with this on,
  // it takes the foreach form a GPU captures there too (the CPU tests of a graphed step).
  void use_device_tensors(bool on) { device_tensors_ = on; }
  double decay_at(std::int64_t updates) const;
  std::int64_t updates() const { return updates_; }
  void set_updates(std::int64_t updates) { updates_ = updates; }
  // From now on a constant decay, without the ramp (D-FINE's and DEIM's "EMA restart" as LibreYOLO
  // does it when the no-augmentation epochs begin).
  void restart(double decay) {
    decay_ = decay;
    tau_ = 0;
    restarted_ = true;
  }
  bool restarted() const { return restarted_; }
  torch::nn::Module& module() { return *ema_; }
  std::shared_ptr<torch::nn::Module> module_ptr() { return ema_; }

 private:
  std::shared_ptr<torch::nn::Module> ema_;
  std::vector<at::Tensor> ema_tensors_;
  at::Tensor decay_now_, keep_now_;  // d and 1 − d of the staged update, on the EMA's device
  double decay_, tau_;
  std::int64_t updates_;
  bool device_tensors_ = false;
  bool restarted_ = false;
};

// Floating parameters and buffers of a module in state-dict order.
std::vector<at::Tensor> floating_state(torch::nn::Module& module);

}  // namespace libreyolo::train
