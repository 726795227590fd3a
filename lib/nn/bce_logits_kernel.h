// The kernel of the fused binary cross-entropy with logits, summed (nn/bce_logits.h). Compiled once
// per CPU capability (lib/meson.build), each copy in its own namespace; nn/cpu_kernels.h picks one.
#pragma once

#include <cstdint>

namespace libreyolo::nn::kernels {

// Σ over the n values of the loss softplus(x) - x t = max(x, 0) - x t + log1p(exp(-|x|)) (float
// per value, float sums flushed to double every few thousand values); where `grad` is not null, also
// its derivative in x there, grad[i] = sigmoid(x[i]) - t[i]: one pass over x and t for both.
using BceLogitsSumFn = double (*)(const float* x, const float* t, std::int64_t n, float* grad);

namespace DEFAULT { BceLogitsSumFn bce_logits_sum_kernel(); }
namespace AVX2 { BceLogitsSumFn bce_logits_sum_kernel(); }
namespace AVX512 { BceLogitsSumFn bce_logits_sum_kernel(); }

}  // namespace libreyolo::nn::kernels
