// The kernel of the fused binary cross-entropy with logits, summed (nn/bce_logits.h). Compiled once
// per CPU capability (lib/meson.build), each copy in its own namespace; nn/cpu_kernels.h picks one.
#pragma once

#include <cstdint>

namespace libreyolo::nn::kernels {

// Σ over the n values of the loss softplus(x) - x t = max(x, 0) - x t + log1p(exp(-|x|)) (float
// per value, float sums flushed to double every few thousand values).
using BceLogitsSumFn = double (*)(const float* x, const float* t, std::int64_t n);
// Its gradient in x, scaled: grad[i] = scale (sigmoid(x[i]) - t[i]).
using BceLogitsGradFn = void (*)(const float* x, const float* t, std::int64_t n, float scale, float* grad);

struct BceLogitsKernels {
  BceLogitsSumFn sum;
  BceLogitsGradFn grad;
};

namespace DEFAULT { BceLogitsKernels bce_logits_kernels(); }
namespace AVX2 { BceLogitsKernels bce_logits_kernels(); }
namespace AVX512 { BceLogitsKernels bce_logits_kernels(); }

}  // namespace libreyolo::nn::kernels
