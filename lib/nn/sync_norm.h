// A BatchNorm2d that sync_bn can route over the global batch (nn::set_batch_norm_sync): the norms
// that sit outside BaseConv (the DETRs' backbone, encoder and decoder norms). The same parameters,
// buffers and names as torch::nn::BatchNorm2d, and its forward unless a sync is set and it trains.
#pragma once

#include "nn/conv.h"

#include <torch/nn/modules/batchnorm.h>

#include <memory>

namespace libreyolo::nn {

class SyncableBatchNorm2dImpl : public torch::nn::BatchNorm2dImpl {
 public:
  using torch::nn::BatchNorm2dImpl::BatchNorm2dImpl;
  torch::Tensor forward(const torch::Tensor& x);
  // relu(forward(x)): the fused BatchNorm+ReLU (nn/bn_silu.h) where it applies and no sync is set.
  torch::Tensor forward_relu(const torch::Tensor& x);
  void set_batch_norm_sync(std::shared_ptr<BatchNormSync> sync) { sync_ = std::move(sync); }

 private:
  std::shared_ptr<BatchNormSync> sync_;
};
TORCH_MODULE(SyncableBatchNorm2d);

}  // namespace libreyolo::nn
