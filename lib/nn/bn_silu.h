// BatchNorm2d in training mode followed by SiLU, fused on the CPU: the Conv+BN+SiLU block's tail
// (nn/conv.h), and RepConvN's two BatchNorms, summed, then SiLU (nn/gelan.h); together 291
// BatchNorms and 237 SiLUs per YOLOv9-t step. One autograd node instead of two (or four):
//  - forward: the batch statistics (one pass per input), then y = Σ x·scale + shift and
//    z = y·sigmoid(y) in one pass; neither BN output nor their sum is ever stored;
//  - backward: one pass for Σdy and each Σdy·x̂ (dy = dz·silu'(y), y recomputed), one for the dx;
//  - float and bfloat16 (autocast's convolution output), channels-last, with AVX-512, AVX2 or
//    plain kernels (nn/bn_silu_kernel.h) picked as ATen picks its own (ATEN_CPU_CAPABILITY).
// The running statistics and num_batches_tracked change as BatchNorm2d's forward changes them.
// Anything else (a GPU, another layout or dtype, eval mode) keeps the unfused ops.
#pragma once

#include <torch/nn/modules/batchnorm.h>

#include <cstdint>
#include <string>

namespace libreyolo::nn {

// Whether batch_norm_silu() would run the fused kernels for `x` under `bn` (training mode, CPU,
// float/bfloat16, 4-D channels-last, affine with running statistics, more than one row, and not
// switched off by LIBREYOLO_FUSED_BN_SILU=0).
bool fused_bn_silu_applies(const torch::Tensor& x, const torch::nn::BatchNorm2dImpl& bn);

// silu(bn(x)) for `bn` in training mode, fused. Call only where fused_bn_silu_applies().
torch::Tensor batch_norm_silu(const torch::Tensor& x, torch::nn::BatchNorm2dImpl& bn);

// silu(bn1(x1) + bn2(x2)), both in training mode, x1 and x2 of one shape and dtype, fused. Call
// only where fused_bn_silu_applies() holds for both.
torch::Tensor batch_norm_add_silu(const torch::Tensor& x1, torch::nn::BatchNorm2dImpl& bn1, const torch::Tensor& x2,
                                  torch::nn::BatchNorm2dImpl& bn2);

// On unless LIBREYOLO_FUSED_BN_SILU=0; benchmarks switch it to compare against ATen's two ops.
bool fused_bn_silu_enabled();
void set_fused_bn_silu_enabled(bool enabled);

// The distance between rows (pixels) of a 4-D tensor whose channels are contiguous and whose
// pixels are evenly spaced: its channels for a channels-last tensor, more for a channel slice of a
// wider one (what cat's and split's backward hand on, read in place by the fused backward); 0 for
// any other layout.
std::int64_t channels_last_row_stride(const torch::Tensor& t);

// The kernels in use: "AVX512", "AVX2" or "DEFAULT".
std::string bn_silu_capability();

}  // namespace libreyolo::nn
