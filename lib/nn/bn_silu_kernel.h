// Kernels of the fused training-mode BatchNorm + SiLU on the CPU (nn/bn_silu.h), over a
// channels-last activation seen as `rows` x `channels` (row-major), or an NCHW one seen as
// `batch` x `channels` planes of `plane` contiguous values (BnSiluPlanes). Compiled once per CPU
// capability (DEFAULT, AVX2, AVX512; lib/meson.build), each copy in its own namespace as ATen's
// vectorised kernels are, and picked at run time.
#pragma once

#include <c10/util/BFloat16.h>

#include <cmath>
#include <cstdint>

namespace libreyolo::nn::kernels {

struct BnSiluShape {
  std::int64_t rows = 0;
  std::int64_t channels = 0;
};

// Per-channel batch mean and biased variance (two passes, float accumulation per thread).
template <typename T>
using BnStatsFn = void (*)(const T* x, BnSiluShape shape, float* mean, float* variance);
// z = silu(x * scale + shift), scale and shift per channel (the BN's affine with the batch stats folded in).
template <typename T>
using BnSiluApplyFn = void (*)(const T* x, T* z, BnSiluShape shape, const float* scale, const float* shift);
// Backward, pass 1: dy = dz * silu'(x * scale + shift), written to `dy` (rounded to T, as ATen's
// silu_backward output is) and summed unrounded: sum_dy[c] = Σ dy, sum_dy_xhat[c] = Σ dy (x - mean) invstd.
// dz's rows are `dz_row_stride` elements apart: `channels`, or more where dz is a channel slice of
// a wider channels-last tensor (as a concatenation's gradient is).
template <typename T>
using BnSiluReduceFn = void (*)(const T* x, const T* dz, std::int64_t dz_row_stride, T* dy, BnSiluShape shape,
                               const float* scale, const float* shift, const float* mean, const float* invstd,
                               float* sum_dy, float* sum_dy_xhat);
// Pass 2, in place: dy becomes dx = gamma invstd (dy - sum_dy / rows - xhat sum_dy_xhat / rows).
template <typename T>
using BnSiluInputGradFn = void (*)(const T* x, T* dy_to_dx, BnSiluShape shape, const float* mean, const float* invstd,
                                  const float* gamma, const float* sum_dy, const float* sum_dy_xhat);

// NCHW: each of the `channels` has `batch` planes of `plane` contiguous values, one after another
// as in a contiguous tensor. These kernels take one channel at a time, its planes both passes:
// the second pass finds them in cache wherever a channel's values fit there (an 80x80 plane at
// batch 8 is 200 KB in float).
struct BnSiluPlanes {
  std::int64_t batch = 0;
  std::int64_t channels = 0;
  std::int64_t plane = 0;
};

// Forward: per channel the batch mean and biased variance, then invstd = 1/sqrt(variance + eps),
// scale = gamma invstd, shift = beta - mean scale, and z = silu(x scale + shift). All of the
// per-channel outputs are written.
template <typename T>
using BnSiluPlanarForwardFn = void (*)(const T* x, T* z, BnSiluPlanes planes, const float* gamma, const float* beta,
                                       float eps, float* mean, float* variance, float* invstd, float* scale, float* shift);
// Backward: sum_dy and sum_dy_xhat as BnSiluReduceFn's, and where dx is not null, dx as
// BnSiluInputGradFn's (from dy rounded to T). dz's plane (n, c) starts at
// dz + n dz_batch_stride + c dz_channel_stride (a channel slice of a wider NCHW tensor has
// a larger batch stride).
template <typename T>
using BnSiluPlanarBackwardFn = void (*)(const T* x, const T* dz, std::int64_t dz_batch_stride,
                                        std::int64_t dz_channel_stride, T* dx, BnSiluPlanes planes, const float* scale,
                                        const float* shift, const float* mean, const float* invstd, const float* gamma,
                                        float* sum_dy, float* sum_dy_xhat);

// The BatchNorm's affine with the batch statistics folded in, for one channel: invstd =
// 1/sqrt(variance + eps), scale = gamma invstd, shift = beta - mean scale (y = x scale + shift).
inline void fold_channel(float mean, float variance, float gamma, float beta, float eps, float& invstd, float& scale,
                         float& shift) {
  invstd = 1.0f / std::sqrt(variance + eps);
  scale = gamma * invstd;
  shift = beta - mean * scale;
}

template <typename T>
struct BnSiluKernels {
  BnStatsFn<T> stats;
  BnSiluApplyFn<T> apply;
  BnSiluReduceFn<T> reduce;
  BnSiluInputGradFn<T> input_grad;
  BnSiluPlanarForwardFn<T> planar_forward;
  BnSiluPlanarBackwardFn<T> planar_backward;
  // ReLU in SiLU's place (channels-last only): z = relu(x * scale + shift), dy = dz where that is above 0.
  BnSiluApplyFn<T> apply_relu;
  BnSiluReduceFn<T> reduce_relu;
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
