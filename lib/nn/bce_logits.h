// Binary cross-entropy with logits, summed over every value: YOLOv9's classification loss
// (8 x 8,400 x 80 values per 640 batch of 8). On the CPU, for contiguous float logits and targets of
// one shape and targets that need no gradient, one kernel pass (nn/bce_logits_kernel.h) sums the
// loss and, in the backward, one writes its gradient already scaled: ATen's
// binary_cross_entropy_with_logits(reduction none) then sum() took about eight passes over the
// values, and its backward three. Anything else runs ATen's ops (a GPU keeps static-shape ATen ops
// that a CUDA graph captures).
#pragma once

#include <ATen/core/Tensor.h>

namespace libreyolo::nn {

// Σ softplus(x) - x t over every value: a 0-dim float tensor (ATen's reduction=sum).
at::Tensor bce_with_logits_sum(const at::Tensor& logits, const at::Tensor& targets);

// Whether bce_with_logits_sum() runs the fused kernel for these tensors.
bool fused_bce_applies(const at::Tensor& logits, const at::Tensor& targets);

}  // namespace libreyolo::nn
