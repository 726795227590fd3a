// Compiled once per CPU capability (-DCPU_CAPABILITY=DEFAULT|AVX2|AVX512, lib/meson.build), as
// nn/bn_silu_kernel.cpp is: each copy in namespace kernels::CPU_CAPABILITY.
#ifndef CPU_CAPABILITY
#error "compile with -DCPU_CAPABILITY=DEFAULT|AVX2|AVX512"
#endif

#include "nn/bce_logits_kernel.h"

#include <ATen/Parallel.h>
#include <ATen/cpu/vec/vec.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace libreyolo::nn::kernels::CPU_CAPABILITY {

namespace {

using Vec = at::vec::Vectorized<float>;
constexpr std::int64_t kLanes = Vec::size();
// Values per task (ATen's GRAIN_SIZE), and per float partial sum before it goes to the double total.
constexpr std::int64_t kGrain = 32768;
constexpr std::int64_t kFlush = 4096;

// loss = max(x, 0) - x t + log1p(e), e = exp(-|x|) in (0, 1]: no overflow for any x.
inline Vec loss(const Vec& x, const Vec& t) {
  return at::vec::maximum(x, Vec(0.0f)) - x * t + x.abs().neg().exp().log1p();
}
inline float loss(float x, float t) { return std::max(x, 0.0f) - x * t + std::log1p(std::exp(-std::abs(x))); }
// sigmoid(x) = 1 / (1 + e) for x >= 0, e / (1 + e) below: neither cancels nor overflows.
inline Vec sigmoid(const Vec& x) {
  const Vec e = x.abs().neg().exp();
  const Vec inverse = Vec(1.0f) / (Vec(1.0f) + e);
  return Vec::blendv(e * inverse, inverse, x >= Vec(0.0f));
}
inline float sigmoid(float x) {
  const float e = std::exp(-std::abs(x));
  const float inverse = 1.0f / (1.0f + e);
  return x >= 0.0f ? inverse : e * inverse;
}

double bce_logits_sum(const float* x, const float* t, std::int64_t n) {
  std::vector<double> totals(static_cast<std::size_t>(at::get_num_threads()), 0.0);
  at::parallel_for(0, n, kGrain, [&](std::int64_t begin, std::int64_t end) {
    double total = 0.0;
    for (std::int64_t chunk = begin; chunk < end; chunk += kFlush) {
      const std::int64_t chunk_end = std::min(end, chunk + kFlush);
      Vec sums(0.0f);
      std::int64_t i = chunk;
      for (; i + kLanes <= chunk_end; i += kLanes) sums = sums + loss(Vec::loadu(x + i), Vec::loadu(t + i));
      float lanes[kLanes];
      sums.store(lanes);
      float chunk_sum = 0.0f;
      for (float lane : lanes) chunk_sum += lane;
      for (; i < chunk_end; ++i) chunk_sum += loss(x[i], t[i]);
      total += chunk_sum;
    }
    totals[static_cast<std::size_t>(at::get_thread_num())] += total;
  });
  double sum = 0.0;
  for (double total : totals) sum += total;
  return sum;
}

void bce_logits_grad(const float* x, const float* t, std::int64_t n, float scale, float* grad) {
  at::parallel_for(0, n, kGrain, [&](std::int64_t begin, std::int64_t end) {
    const Vec factor(scale);
    std::int64_t i = begin;
    for (; i + kLanes <= end; i += kLanes) ((sigmoid(Vec::loadu(x + i)) - Vec::loadu(t + i)) * factor).store(grad + i);
    for (; i < end; ++i) grad[i] = (sigmoid(x[i]) - t[i]) * scale;
  });
}

}  // namespace

BceLogitsKernels bce_logits_kernels() { return {&bce_logits_sum, &bce_logits_grad}; }

}  // namespace libreyolo::nn::kernels::CPU_CAPABILITY
