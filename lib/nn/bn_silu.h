// BatchNorm2d in training mode followed by SiLU, fused on the CPU: the Conv+BN+SiLU block's tail
// (nn/conv.h), 291 BatchNorms and 237 SiLUs per YOLOv9-t step. One autograd node instead of two:
//  - forward: the batch statistics (two passes), then y = x·scale + shift and z = y·sigmoid(y) in
//    one pass; the BN output y is never stored (one activation-sized tensor less per block);
//  - backward: one pass for Σdy and Σdy·x̂ (dy = dz·silu'(y), y recomputed), one for dx;
//  - float and bfloat16 (autocast's convolution output), channels-last or NCHW (YOLOX trains NCHW on
//    the CPU, where its convolutions are faster), with AVX-512, AVX2 or plain kernels
//    (nn/bn_silu_kernel.h) picked as ATen picks its own (ATEN_CPU_CAPABILITY).
// The running statistics and num_batches_tracked change as BatchNorm2d's forward changes them.
// Anything else (a GPU, another layout or dtype, eval mode) keeps the unfused ops.
#pragma once

#include <torch/nn/modules/batchnorm.h>

#include <cstdint>
#include <functional>
#include <string>

namespace libreyolo::nn {

// Whether batch_norm_silu() would run the fused kernels for `x` under `bn` (training mode, CPU,
// float/bfloat16, 4-D channels-last or NCHW-contiguous, affine with running statistics, more than one row, and not
// switched off by LIBREYOLO_FUSED_BN_SILU=0).
bool fused_bn_silu_applies(const torch::Tensor& x, const torch::nn::BatchNorm2dImpl& bn);

// silu(bn(x)) for `bn` in training mode, fused. Call only where fused_bn_silu_applies().
torch::Tensor batch_norm_silu(const torch::Tensor& x, torch::nn::BatchNorm2dImpl& bn);

// relu(bn(x)) fused the same way, for `x` strictly channels-last (the classifiers' Conv-BN-ReLU
// tails, trained channels-last on the CPU): fused_bn_silu_applies() and channels-last, not also
// NCHW-contiguous. NCHW keeps ATen's ops (the classifiers' parity runs there, bit for bit).
bool fused_bn_relu_applies(const torch::Tensor& x, const torch::nn::BatchNorm2dImpl& bn);
torch::Tensor batch_norm_relu(const torch::Tensor& x, torch::nn::BatchNorm2dImpl& bn);

// sync_bn's form of batch_norm_silu(): the statistics cover every rank's batch. `sum` all-reduces a
// CPU tensor in place (a sum over the ranks). Forward: this batch's per-channel mean and variance
// (the fused kernels' pass), every rank's gathered in one collective (each rank fills its own row
// of a zero [world, 2C + 1] table) and merged by Chan's formula in double, the same on every rank;
// then the fused normalise + SiLU pass. Backward: the fused reduction, one collective for the two
// sums, the fused input-gradient pass. Two collectives per layer and step, as an unfused sync_bn,
// and the single-process kernels' passes otherwise. Call only where fused_bn_silu_sync_applies()
// (as fused_bn_silu_applies(), channels-last only, and not switched off by LIBREYOLO_FUSED_SYNC_BN=0,
// which benchmarks set to time the unfused definition).
using RankSum = std::function<void(torch::Tensor&)>;
bool fused_bn_silu_sync_applies(const torch::Tensor& x, const torch::nn::BatchNorm2dImpl& bn);
torch::Tensor batch_norm_silu_synced(const torch::Tensor& x, torch::nn::BatchNorm2dImpl& bn, const RankSum& sum, int rank,
                                     int world_size);

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
