// PResNet, RT-DETR's ResNet-vd backbone (depths 18, 34, 50, 101): a three-conv stem, then four
// stages of basic (18, 34) or bottleneck (50, 101) blocks whose strided shortcuts average-pool
// before a 1x1 conv. Returns the stride 8, 16 and 32 maps. Submodule names follow the reference's
// weight layout (conv1.conv1_1, res_layers.<i>.blocks.<j>.branch2a/b/c, short), so LibreYOLO's
// state dicts load unchanged.
#pragma once

#include "nn/sync_norm.h"

#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>

#include <vector>

namespace libreyolo::models::detr {

// BatchNorm with fixed statistics and affine (buffers, not parameters): x * scale + shift with
// scale = weight / sqrt(running_var + eps), computed as the reference computes it.
class FrozenBatchNorm2dImpl : public torch::nn::Module {
 public:
  explicit FrozenBatchNorm2dImpl(int channels, double eps = 1e-5);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  torch::Tensor weight_, bias_, running_mean_, running_var_;
  double eps_;
};
TORCH_MODULE(FrozenBatchNorm2d);

enum class Activation { none, relu, silu, gelu };
torch::Tensor activate(const torch::Tensor& x, Activation activation);

// Conv (no bias, padding (k-1)/2) + BatchNorm (frozen or not) + an activation; names conv, norm.
// The reference's ConvNormLayer, in the backbone (ReLU) and the encoder (SiLU).
class ConvNormImpl : public torch::nn::Module {
 public:
  ConvNormImpl(int in_channels, int out_channels, int kernel, int stride, Activation activation, bool frozen_norm = false,
               int groups = 1);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  torch::nn::Conv2d conv_{nullptr};
  nn::SyncableBatchNorm2d norm_{nullptr};
  FrozenBatchNorm2d frozen_{nullptr};
  Activation activation_;
};
TORCH_MODULE(ConvNorm);

struct PResNetOptions {
  int depth = 18;            // 18, 34, 50 or 101
  int freeze_at = -1;        // >= 0: the stem and the first freeze_at stages take no gradient
  bool freeze_norm = false;  // every BatchNorm frozen (FrozenBatchNorm2d)
};

class PResNetImpl : public torch::nn::Module {
 public:
  explicit PResNetImpl(const PResNetOptions& options);
  // The outputs of stages 1, 2 and 3 (strides 8, 16, 32).
  std::vector<torch::Tensor> forward(const torch::Tensor& x);
  // Channels of those outputs (basic blocks: 128, 256, 512; bottlenecks: 512, 1024, 2048).
  std::vector<int> out_channels() const;

 private:
  torch::nn::Sequential stem_{nullptr};
  torch::nn::ModuleList stages_{nullptr};
  PResNetOptions options_;
};
TORCH_MODULE(PResNet);

}  // namespace libreyolo::models::detr
