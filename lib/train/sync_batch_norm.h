// sync_bn=true: batch normalisation whose statistics cover the global batch. Forward all-reduces
// each channel's sum, sum of squares and count, so every rank normalises with the mean and
// variance of all ranks' samples together and updates the same running statistics; backward
// all-reduces the two sums the input gradient needs (Σdy and Σdy·(x−μ)). The weight and bias
// gradients stay per rank: the gradient reducer averages them like every other parameter, and
// that average is the single-process gradient over the N·B samples. LibTorch's C++ API has no
// SyncBatchNorm (PyTorch's is Python), so this is ours, written from the definition.
#pragma once

#include "nn/bn_silu.h"
#include "nn/conv.h"
#include "train/collectives.h"

namespace libreyolo::train {

// On the CPU, a Conv+BN+SiLU block's tail on a channels-last activation runs the fused kernels with
// the global statistics (nn::batch_norm_silu_synced, forward_silu); anything else (a GPU, NCHW, a
// BatchNorm without SiLU) runs the definition below.
class SyncBatchNorm final : public nn::BatchNormSync {
 public:
  explicit SyncBatchNorm(Collectives& collectives)
      : collectives_(collectives), sum_([this](torch::Tensor& t) { collectives_.sum(t); }) {}
  torch::Tensor forward(const torch::Tensor& x, torch::nn::BatchNorm2dImpl& bn) override;
  torch::Tensor forward_silu(const torch::Tensor& x, torch::nn::BatchNorm2dImpl& bn) override;

 private:
  Collectives& collectives_;
  nn::RankSum sum_;  // the fused backward holds a pointer to it
};

}  // namespace libreyolo::train
