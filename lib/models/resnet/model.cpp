#include "models/resnet/model.h"

#include "core/error.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/nn/functional/activation.h>
#include <torch/nn/functional/pooling.h>

#include <string>

namespace libreyolo::models::resnet {

namespace {

constexpr std::array<SizeSpec, 4> kSizes{{
    {"18", false, {2, 2, 2, 2}},
    {"34", false, {3, 4, 6, 3}},
    {"50", true, {3, 4, 6, 3}},
    {"101", true, {3, 4, 23, 3}},
}};

torch::nn::Conv2d conv(int in, int out, int kernel, int stride, int padding) {
  return torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, kernel).stride(stride).padding(padding).bias(false));
}

}  // namespace

std::span<const SizeSpec> sizes() { return kSizes; }

const SizeSpec& size_spec(std::string_view size) {
  for (const auto& spec : kSizes) {
    if (spec.name == size) return spec;
  }
  throw ModelError(fmt::format("unknown ResNet size '{}' (sizes: 18, 34, 50, 101)", size));
}

BlockImpl::BlockImpl(bool bottleneck, int in_channels, int planes, int stride) : bottleneck_(bottleneck) {
  const int out_channels = planes * (bottleneck ? 4 : 1);
  if (bottleneck) {
    conv1_ = register_module("conv1", conv(in_channels, planes, 1, 1, 0));
    bn1_ = register_module("bn1", nn::SyncableBatchNorm2d(planes));
    conv2_ = register_module("conv2", conv(planes, planes, 3, stride, 1));  // v1.5: the stride on the 3x3
    bn2_ = register_module("bn2", nn::SyncableBatchNorm2d(planes));
    conv3_ = register_module("conv3", conv(planes, out_channels, 1, 1, 0));
    bn3_ = register_module("bn3", nn::SyncableBatchNorm2d(out_channels));
  } else {
    conv1_ = register_module("conv1", conv(in_channels, planes, 3, stride, 1));
    bn1_ = register_module("bn1", nn::SyncableBatchNorm2d(planes));
    conv2_ = register_module("conv2", conv(planes, planes, 3, 1, 1));
    bn2_ = register_module("bn2", nn::SyncableBatchNorm2d(planes));
  }
  if (stride != 1 || in_channels != out_channels) {
    downsample_ = register_module("downsample",
                                  torch::nn::Sequential(conv(in_channels, out_channels, 1, stride, 0), nn::SyncableBatchNorm2d(out_channels)));
  }
}

torch::Tensor BlockImpl::forward(const torch::Tensor& x) {
  torch::Tensor y = bn1_->forward_relu(conv1_(x));
  if (bottleneck_) {
    y = bn2_->forward_relu(conv2_(y));
    y = bn3_(conv3_(y));
  } else {
    y = bn2_(conv2_(y));
  }
  return torch::relu(y + (downsample_ ? downsample_->forward(x) : x));
}

ModelImpl::ModelImpl(std::string_view size, int class_count) {
  const SizeSpec& spec = size_spec(size);
  const int expansion = spec.bottleneck ? 4 : 1;
  conv1_ = register_module("conv1", conv(3, 64, 7, 2, 3));
  bn1_ = register_module("bn1", nn::SyncableBatchNorm2d(64));
  int in_channels = 64;
  for (int stage = 0; stage < 4; ++stage) {
    const int planes = 64 << stage;
    torch::nn::Sequential layer;
    for (int i = 0; i < spec.blocks[static_cast<std::size_t>(stage)]; ++i) {
      layer->push_back(Block(spec.bottleneck, in_channels, planes, i == 0 && stage > 0 ? 2 : 1));
      in_channels = planes * expansion;
    }
    layers_[static_cast<std::size_t>(stage)] = register_module(fmt::format("layer{}", stage + 1), layer);
  }
  num_features_ = 512 * expansion;
  fc_ = register_module("fc", torch::nn::Linear(num_features_, class_count));
}

torch::Tensor ModelImpl::features(const torch::Tensor& x) {
  torch::Tensor y = bn1_->forward_relu(conv1_(x));
  y = torch::max_pool2d(y, /*kernel_size=*/3, /*stride=*/2, /*padding=*/1);
  for (auto& layer : layers_) y = layer->forward(y);
  return torch::adaptive_avg_pool2d(y, {1, 1}).flatten(1);  // global_pool: AdaptiveAvgPool2d(1), Flatten(1)
}

torch::Tensor ModelImpl::forward(const torch::Tensor& x) { return fc_(features(x)); }

}  // namespace libreyolo::models::resnet
