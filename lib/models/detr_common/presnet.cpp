#include "models/detr_common/presnet.h"

#include "core/error.h"
#include "nn/sync_norm.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/nn/functional/pooling.h>

#include <array>

namespace libreyolo::models::detr {

namespace {

namespace F = torch::nn::functional;

// Blocks per stage of each depth.
std::array<int, 4> stage_blocks(int depth) {
  switch (depth) {
    case 18: return {2, 2, 2, 2};
    case 34: return {3, 4, 6, 3};
    case 50: return {3, 4, 6, 3};
    case 101: return {3, 4, 23, 3};
    default: throw ModelError(fmt::format("PResNet depth {} is not one of 18, 34, 50, 101", depth));
  }
}

// The vd shortcut of a strided block: 2x2 average pool (ceil), then a 1x1 ConvNorm ("short.conv").
class PooledShortcutImpl : public torch::nn::Module {
 public:
  PooledShortcutImpl(int in_channels, int out_channels, bool frozen_norm)
      : conv_(register_module("conv", ConvNorm(in_channels, out_channels, 1, 1, Activation::none, frozen_norm))) {}
  torch::Tensor forward(const torch::Tensor& x) {
    return conv_->forward(F::avg_pool2d(x, F::AvgPool2dFuncOptions(2).stride(2).ceil_mode(true)));
  }

 private:
  ConvNorm conv_;
};
TORCH_MODULE(PooledShortcut);

// A residual block: branch2a, branch2b (and branch2c for bottlenecks), plus the input or its
// projection ("short"), then ReLU.
class ResidualBlockImpl : public torch::nn::Module {
 public:
  ResidualBlockImpl(int in_channels, int channels, int stride, bool identity, bool bottleneck, bool frozen_norm) {
    const int expansion = bottleneck ? 4 : 1;
    if (bottleneck) {
      branches_.push_back(register_module("branch2a", ConvNorm(in_channels, channels, 1, 1, Activation::relu, frozen_norm)));
      branches_.push_back(register_module("branch2b", ConvNorm(channels, channels, 3, stride, Activation::relu, frozen_norm)));
      branches_.push_back(register_module("branch2c", ConvNorm(channels, channels * expansion, 1, 1, Activation::none, frozen_norm)));
    } else {
      branches_.push_back(register_module("branch2a", ConvNorm(in_channels, channels, 3, stride, Activation::relu, frozen_norm)));
      branches_.push_back(register_module("branch2b", ConvNorm(channels, channels, 3, 1, Activation::none, frozen_norm)));
    }
    if (!identity && stride == 2) {
      pooled_ = register_module("short", PooledShortcut(in_channels, channels * expansion, frozen_norm));
    } else if (!identity) {
      projection_ = register_module("short", ConvNorm(in_channels, channels * expansion, 1, stride, Activation::none, frozen_norm));
    }
  }

  torch::Tensor forward(const torch::Tensor& x) {
    torch::Tensor out = x;
    for (auto& branch : branches_) out = branch->forward(out);
    const torch::Tensor shortcut = pooled_ ? pooled_->forward(x) : projection_ ? projection_->forward(x) : x;
    return at::relu(out + shortcut);
  }

 private:
  std::vector<ConvNorm> branches_;
  PooledShortcut pooled_{nullptr};
  ConvNorm projection_{nullptr};
};
TORCH_MODULE(ResidualBlock);

// One stage: "blocks", the first strided (except the first stage) and projecting.
class StageImpl : public torch::nn::Module {
 public:
  StageImpl(int in_channels, int channels, int count, int stride, bool bottleneck, bool frozen_norm)
      : blocks_(register_module("blocks", torch::nn::ModuleList())) {
    for (int i = 0; i < count; ++i) {
      blocks_->push_back(ResidualBlock(in_channels, channels, i == 0 ? stride : 1, i != 0, bottleneck, frozen_norm));
      in_channels = channels * (bottleneck ? 4 : 1);
    }
  }
  torch::Tensor forward(torch::Tensor x) {
    for (const auto& block : *blocks_) x = block->as<ResidualBlockImpl>()->forward(x);
    return x;
  }

 private:
  torch::nn::ModuleList blocks_;
};
TORCH_MODULE(Stage);

void freeze(torch::nn::Module& module) {
  for (auto& parameter : module.parameters()) parameter.set_requires_grad(false);
}

}  // namespace

FrozenBatchNorm2dImpl::FrozenBatchNorm2dImpl(int channels, double eps)
    : weight_(register_buffer("weight", at::ones({channels}))),
      bias_(register_buffer("bias", at::zeros({channels}))),
      running_mean_(register_buffer("running_mean", at::zeros({channels}))),
      running_var_(register_buffer("running_var", at::ones({channels}))),
      eps_(eps) {}

torch::Tensor FrozenBatchNorm2dImpl::forward(const torch::Tensor& x) {
  const torch::Tensor scale = weight_.reshape({1, -1, 1, 1}) * (running_var_.reshape({1, -1, 1, 1}) + eps_).rsqrt();
  const torch::Tensor shift = bias_.reshape({1, -1, 1, 1}) - running_mean_.reshape({1, -1, 1, 1}) * scale;
  return x * scale + shift;
}

torch::Tensor activate(const torch::Tensor& x, Activation activation) {
  switch (activation) {
    case Activation::relu: return at::relu(x);
    case Activation::silu: return at::silu(x);
    case Activation::gelu: return at::gelu(x);
    case Activation::none: break;
  }
  return x;
}

ConvNormImpl::ConvNormImpl(int in_channels, int out_channels, int kernel, int stride, Activation activation, bool frozen_norm,
                           int groups)
    : conv_(register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(in_channels, out_channels, kernel)
                                                          .stride(stride)
                                                          .padding((kernel - 1) / 2)
                                                          .groups(groups)
                                                          .bias(false)))),
      activation_(activation) {
  if (frozen_norm) {
    frozen_ = register_module("norm", FrozenBatchNorm2d(out_channels));
  } else {
    norm_ = register_module("norm", nn::SyncableBatchNorm2d(out_channels));  // eps 1e-5, momentum 0.1
  }
}

torch::Tensor ConvNormImpl::forward(const torch::Tensor& x) {
  torch::Tensor y = conv_->forward(x);
  y = frozen_ ? frozen_->forward(y) : norm_->forward(y);
  return activate(y, activation_);
}

PResNetImpl::PResNetImpl(const PResNetOptions& options) : options_(options) {
  const auto blocks = stage_blocks(options.depth);
  const bool bottleneck = options.depth >= 50, frozen = options.freeze_norm;
  stem_ = register_module("conv1", torch::nn::Sequential());
  stem_->push_back("conv1_1", ConvNorm(3, 32, 3, 2, Activation::relu, frozen));
  stem_->push_back("conv1_2", ConvNorm(32, 32, 3, 1, Activation::relu, frozen));
  stem_->push_back("conv1_3", ConvNorm(32, 64, 3, 1, Activation::relu, frozen));
  stages_ = register_module("res_layers", torch::nn::ModuleList());
  int in_channels = 64;
  const std::array<int, 4> channels{64, 128, 256, 512};
  for (int i = 0; i < 4; ++i) {
    stages_->push_back(Stage(in_channels, channels[i], blocks[i], i == 0 ? 1 : 2, bottleneck, frozen));
    in_channels = channels[i] * (bottleneck ? 4 : 1);
  }
  if (options.freeze_at >= 0) {
    freeze(*stem_);
    for (int i = 0; i < std::min(options.freeze_at, 4); ++i) freeze(*stages_[i]);
  }
}

std::vector<torch::Tensor> PResNetImpl::forward(const torch::Tensor& input) {
  torch::Tensor x = F::max_pool2d(stem_->forward(input), F::MaxPool2dFuncOptions(3).stride(2).padding(1));
  std::vector<torch::Tensor> outputs;
  for (std::size_t i = 0; i < stages_->size(); ++i) {
    x = stages_[i]->as<StageImpl>()->forward(x);
    if (i >= 1) outputs.push_back(x);
  }
  return outputs;
}

std::vector<int> PResNetImpl::out_channels() const {
  const int expansion = options_.depth >= 50 ? 4 : 1;
  return {128 * expansion, 256 * expansion, 512 * expansion};
}

}  // namespace libreyolo::models::detr
