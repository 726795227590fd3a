// Mixed precision: an autocast guard around forward and loss, and a dynamic loss scaler for
// float16 (PyTorch's GradScaler algorithm on its own ops: _amp_foreach_non_finite_check_and_unscale_
// and _amp_update_scale_), whose state travels in checkpoints. bfloat16 needs no scaler.
#pragma once

#include <ATen/Tensor.h>
#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>
#include <torch/optim/optimizer.h>

#include <optional>

namespace libreyolo::train {

// Enables autocast for `device` with `dtype` in this scope (nothing when `enabled` is false);
// restores the previous state and clears the cast cache on exit.
class AutocastGuard {
 public:
  // `cache`: autocast's cache of cast weights; off while CUDA graphs warm up, capture and replay,
  // so that all three see the same casts.
  AutocastGuard(c10::DeviceType device, c10::ScalarType dtype, bool enabled, bool cache = true);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  c10::DeviceType device_;
  bool enabled_, was_enabled_ = false, was_caching_ = true;
  c10::ScalarType previous_dtype_ = c10::kFloat;
};

// True when this CPU runs bfloat16 natively (avx512_bf16 or AMX), so CPU autocast pays off.
bool cpu_has_bf16();

struct GradScalerState {
  double scale = 65536.0;
  std::int64_t growth_tracker = 0;
};

class GradScaler {
 public:
  explicit GradScaler(bool enabled, double init_scale = 65536.0, double growth_factor = 2.0,
                      double backoff_factor = 0.5, std::int64_t growth_interval = 2000);
  bool enabled() const { return enabled_; }
  at::Tensor scale(const at::Tensor& loss);  // loss × scale (identity when disabled)
  // Forgets that this step's gradients were unscaled (host state only): a graphed optimizer step
  // begins with it, so that a capture that failed half-way leaves the eager retry correct.
  void begin_step() { unscaled_ = false; }
  // Divides the gradients by the scale in place (once per step) and records whether any is inf/NaN.
  void unscale(torch::optim::Optimizer& optimizer);
  // Steps unless the gradients held inf/NaN. Returns whether it stepped, as a bool scalar on the
  // gradients' device. A CapturableOptimizer masks the skipped step on the device (no host sync;
  // capturable with the unscale and update()); another optimizer costs one sync to decide.
  // `stage`: false when the caller has staged the optimizer's hyperparameters itself (eagerly,
  // before a graph replays this step).
  at::Tensor step(torch::optim::Optimizer& optimizer, bool stage = true);
  // Grows the scale after growth_interval clean steps, backs it off after an inf/NaN step.
  void update();
  double current_scale() const;
  GradScalerState state() const;
  void load_state(const GradScalerState& state);

 private:
  void ensure_scale(const at::Device& device);
  bool enabled_;
  double init_scale_, growth_factor_, backoff_factor_;
  std::int64_t growth_interval_;
  at::Tensor scale_, growth_tracker_, found_inf_;
  bool unscaled_ = false;
  std::optional<GradScalerState> pending_state_;
};

}  // namespace libreyolo::train
