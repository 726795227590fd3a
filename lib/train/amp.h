// Mixed precision: an autocast guard around forward and loss, and a dynamic loss scaler for
// float16 (PyTorch's GradScaler algorithm on its own ops: _amp_foreach_non_finite_check_and_unscale_
// and _amp_update_scale_), whose state travels in checkpoints. bfloat16 needs no scaler.
#pragma once

#include <ATen/Tensor.h>
#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>
#include <torch/optim/optimizer.h>

#include <optional>
#include <string>

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

// True when this CPU has bfloat16 instructions (avx512_bf16 or AMX). Whether they pay off is
// another matter: measure_cpu_bf16_speedup says.
bool cpu_has_bf16();
bool cpu_has_amx();  // amx_bf16: the tile unit that makes bfloat16 convolutions several times faster

// Times one 3×3 convolution (64 → 64 channels, 8 × 40 × 40, channels-last: a YOLOv9-t neck
// layer), forward and backward, in float32 and in bfloat16 on the CPU, and returns float32's
// time over bfloat16's (medians of 5). About 0.2 s on 2 cores. Without AMX, bfloat16 runs at
// 1.6x float32 on an AMD EPYC with avx512_bf16 and at 0.7x on an Intel Xeon with it (one
// dot-product port against two FMA ports).
double measure_cpu_bf16_speedup();

// The line a CPU bfloat16 run logs about that figure, and whether it is a warning (bfloat16
// measured slower than float32: amp=false trains faster).
struct CpuBf16Note {
  bool warn = false;
  std::string line;
};
CpuBf16Note cpu_bf16_note(double speedup, bool amx);

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
