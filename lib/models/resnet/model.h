// ResNet (18/34/50/101), as libreyolo 1.6.0 builds it (models/resnet/nn.py, timm's and
// torchvision's layout): v1.5 (a bottleneck's stride on its 3x3), the plain 7x7 stem, a
// 1x1-convolution downsample, global average pooling and one linear classifier. Module names
// follow its state dicts (conv1, bn1, layer{1-4}.{i}.conv{1-3}/bn{1-3}/downsample.{0,1}, fc), so
// weights move between the two unchanged. Batch norms (syncable: sync_bn) at torch's defaults (eps 1e-5, momentum
// 0.1); no dropout.
#pragma once

#include <torch/nn/module.h>
#include "nn/sync_norm.h"

#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include <array>
#include <span>
#include <string_view>

namespace libreyolo::models::resnet {

struct SizeSpec {
  std::string_view name;       // "18", "34", "50", "101"
  bool bottleneck;             // Bottleneck blocks (expansion 4), else BasicBlock (expansion 1)
  std::array<int, 4> blocks;   // per stage
};

std::span<const SizeSpec> sizes();
// Throws ModelError for an unknown size.
const SizeSpec& size_spec(std::string_view size);

// BasicBlock (expansion 1) or Bottleneck (expansion 4): the residual branch, the downsample where
// the shape changes, the sum, ReLU.
class BlockImpl : public torch::nn::Module {
 public:
  BlockImpl(bool bottleneck, int in_channels, int planes, int stride);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  bool bottleneck_;
  torch::nn::Conv2d conv1_{nullptr}, conv2_{nullptr}, conv3_{nullptr};
  nn::SyncableBatchNorm2d bn1_{nullptr}, bn2_{nullptr}, bn3_{nullptr};
  torch::nn::Sequential downsample_{nullptr};
};
TORCH_MODULE(Block);

class ModelImpl : public torch::nn::Module {
 public:
  ModelImpl(std::string_view size, int class_count);
  // Logits [B, class_count] of images [B, 3, H, W].
  torch::Tensor forward(const torch::Tensor& x);
  // The pooled features [B, num_features()] the classifier takes.
  torch::Tensor features(const torch::Tensor& x);
  int num_features() const { return num_features_; }

 private:
  int num_features_;
  torch::nn::Conv2d conv1_{nullptr};
  nn::SyncableBatchNorm2d bn1_{nullptr};
  std::array<torch::nn::Sequential, 4> layers_{nullptr, nullptr, nullptr, nullptr};
  torch::nn::Linear fc_{nullptr};
};
TORCH_MODULE(Model);

}  // namespace libreyolo::models::resnet
