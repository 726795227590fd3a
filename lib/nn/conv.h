// Shared convolution blocks: Conv2d (no bias) + BatchNorm (eps 1e-3, momentum 0.03) + SiLU, and
// its depthwise-separable form. Submodule names follow the YOLOX/LibreYOLO weight layout
// (conv/bn; dconv/pconv), so state dicts load unchanged.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/conv.h>

#include <memory>

namespace libreyolo::nn {

inline constexpr double kBatchNormEps = 1e-3;
inline constexpr double kBatchNormMomentum = 0.03;

// Batch normalisation over more than this process's batch (synchronised BatchNorm in
// data-parallel training, lib/dist/sync_batch_norm.h). Called in training mode only; eval mode
// and frozen layers use the running statistics as always.
class BatchNormSync {
 public:
  virtual ~BatchNormSync() = default;
  virtual torch::Tensor forward(const torch::Tensor& x, torch::nn::BatchNorm2dImpl& bn) = 0;
  // silu(forward(x, bn)) in one fused step where one exists for `x` (nn/bn_silu.h), else undefined.
  virtual torch::Tensor forward_silu(const torch::Tensor&, torch::nn::BatchNorm2dImpl&) { return {}; }
};

class BaseConvImpl : public torch::nn::Module {
 public:
  // `bn_eps`, `bn_momentum`: RTMDet's BatchNorms keep PyTorch's defaults (1e-5, 0.1).
  BaseConvImpl(int in_channels, int out_channels, int kernel, int stride, int groups = 1, bool activation = true,
               double bn_eps = kBatchNormEps, double bn_momentum = kBatchNormMomentum);
  torch::Tensor forward(const torch::Tensor& x);
  // From now on the convolution is `owner`'s (RTMDet's head shares its tower convolutions across
  // levels, each level keeping its own BatchNorm): no weight of its own, none in the state dict.
  void share_convolution_of(const BaseConvImpl& owner);

  // Folds the BatchNorm into the convolution (a biased conv, no BN) for inference.
  void fuse();
  bool fused() const { return !bn_; }
  // The conv's effective (weight, bias) with the BatchNorm folded in; works before and after fuse().
  std::pair<torch::Tensor, torch::Tensor> folded_weight_and_bias() const;
  // The options of this conv as a biased conv (what fusing produces).
  torch::nn::Conv2dOptions fused_options() const;
  void set_batch_norm_sync(std::shared_ptr<BatchNormSync> sync) { sync_ = std::move(sync); }

 private:
  torch::nn::Conv2d conv_{nullptr};
  torch::nn::BatchNorm2d bn_{nullptr};
  std::shared_ptr<BatchNormSync> sync_;
  bool activation_;
  bool borrowed_ = false;  // conv_ is another BaseConv's (share_convolution_of)
  int in_channels_, out_channels_, kernel_, stride_, groups_;
};
TORCH_MODULE(BaseConv);

// Depthwise kxk (groups = in) then pointwise 1x1, each with BN + SiLU.
class DWConvImpl : public torch::nn::Module {
 public:
  DWConvImpl(int in_channels, int out_channels, int kernel, int stride);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  BaseConv dconv_{nullptr};
  BaseConv pconv_{nullptr};
};
TORCH_MODULE(DWConv);

// Routes every BaseConv's BatchNorm and every SyncableBatchNorm2d (nn/sync_norm.h) under `root`
// through `sync` (null: back to plain BatchNorm). Returns how many layers it set.
std::size_t set_batch_norm_sync(torch::nn::Module& root, const std::shared_ptr<BatchNormSync>& sync);

// Nearest-neighbour 2x upsampling (the necks of both families).
torch::Tensor upsample_nearest_2x(const torch::Tensor& x);

// BaseConv or DWConv behind one type, for blocks that take a `depthwise` switch.
torch::nn::AnyModule make_conv(int in_channels, int out_channels, int kernel, int stride, bool depthwise);

}  // namespace libreyolo::nn
