// Kernels of the fused training-mode BatchNorm + SiLU on the CPU (nn/bn_silu.h), over channels-last
// activations seen as `rows` x `channels` (row-major). One or two BatchNorms may feed the SiLU:
// silu(bn(x)) in Conv+BN+SiLU, silu(bn₁(x₁) + bn₂(x₂)) in RepConvN. Compiled once per CPU
// capability (DEFAULT, AVX2, AVX512; lib/meson.build), each copy in its own namespace as ATen's
// vectorised kernels are, and picked at run time.
#pragma once

#include <c10/util/BFloat16.h>

#include <cstdint>

namespace libreyolo::nn::kernels {

struct BnSiluShape {
  std::int64_t rows = 0;
  std::int64_t channels = 0;
};

// The most BatchNorms one SiLU takes.
inline constexpr int kMaxBranches = 2;

// One BatchNorm feeding the SiLU: its input and its per-channel values (float, `channels` long).
template <typename T>
struct BnBranch {
  const T* x = nullptr;
  const float* scale = nullptr;   // gamma · invstd: the BN's affine with the batch statistics folded in
  const float* mean = nullptr;    // the batch mean (backward only)
  const float* invstd = nullptr;  // 1 / sqrt(var + eps) (backward only)
};

// Per-channel batch mean and biased variance of one input (float accumulation per thread).
template <typename T>
using BnStatsFn = void (*)(const T* x, BnSiluShape shape, float* mean, float* variance);
// z = silu(y), y = Σ_b x_b · scale_b + shift (`shift`: the branches' shifts, summed).
template <typename T>
using BnSiluApplyFn = void (*)(const BnBranch<T>* branches, int count, T* z, BnSiluShape shape, const float* shift);
// Backward, pass 1: dy = dz · silu'(y), written to `dy` (rounded to T, as ATen's silu_backward
// output is) and summed unrounded: sum_dy[c] = Σ dy, sum_dy_xhat[b][c] = Σ dy (x_b - mean_b) invstd_b.
// dz's rows are `dz_row_stride` elements apart (`channels`, or more where dz is a channel slice of
// a wider channels-last tensor, as a concatenation's gradient is).
template <typename T>
using BnSiluReduceFn = void (*)(const BnBranch<T>* branches, int count, const T* dz, std::int64_t dz_row_stride, T* dy,
                               BnSiluShape shape, const float* shift, float* sum_dy, float* const* sum_dy_xhat);
// Pass 2: dx_b = scale_b (dy - sum_dy / rows - xhat_b sum_dy_xhat_b / rows). dx[0] may be dy itself.
template <typename T>
using BnSiluInputGradFn = void (*)(const BnBranch<T>* branches, int count, const T* dy, T* const* dx, BnSiluShape shape,
                                  const float* sum_dy, const float* const* sum_dy_xhat);

template <typename T>
struct BnSiluKernels {
  BnStatsFn<T> stats;
  BnSiluApplyFn<T> apply;
  BnSiluReduceFn<T> reduce;
  BnSiluInputGradFn<T> input_grad;
};

struct BnSiluKernelSet {
  const char* capability;
  BnSiluKernels<float> f32;
  BnSiluKernels<c10::BFloat16> bf16;
};

namespace DEFAULT { BnSiluKernelSet kernel_set(); }
namespace AVX2 { BnSiluKernelSet kernel_set(); }
namespace AVX512 { BnSiluKernelSet kernel_set(); }

}  // namespace libreyolo::nn::kernels
