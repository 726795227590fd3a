// sync_bn=true: batch normalisation whose statistics cover the global batch. Forward all-reduces
// each channel's sum, sum of squares and count, so every rank normalises with the mean and
// variance of all ranks' samples together and updates the same running statistics; backward
// all-reduces the two sums the input gradient needs (Σdy and Σdy·(x−μ)). The weight and bias
// gradients stay per rank: the gradient reducer averages them like every other parameter, and
// that average is the single-process gradient over the N·B samples. LibTorch's C++ API has no
// SyncBatchNorm (PyTorch's is Python), so this is ours, written from the definition.
#pragma once

#include "nn/conv.h"
#include "train/collectives.h"

namespace libreyolo::train {

class SyncBatchNorm final : public nn::BatchNormSync {
 public:
  explicit SyncBatchNorm(Collectives& collectives) : collectives_(collectives) {}
  torch::Tensor forward(const torch::Tensor& x, torch::nn::BatchNorm2dImpl& bn) override;

 private:
  Collectives& collectives_;
};

}  // namespace libreyolo::train
