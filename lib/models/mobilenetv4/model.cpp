#include "models/mobilenetv4/model.h"

#include "core/error.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/nn/functional/activation.h>
#include <torch/nn/functional/pooling.h>

#include <algorithm>

namespace libreyolo::models::mobilenetv4 {

namespace {

constexpr auto cn = BlockType::cn, er = BlockType::er, uir = BlockType::uir;

// libreyolo's ARCH_DEFS (timm's _gen_mobilenet_v4), entry for entry.
const std::vector<SizeSpec>& all_sizes() {
  static const std::vector<SizeSpec> specs{
      {"s", 32,
       {{{cn, 1, 0, 3, 2, 1, 32}, {cn, 1, 0, 1, 1, 1, 32}},
        {{cn, 1, 0, 3, 2, 1, 96}, {cn, 1, 0, 1, 1, 1, 64}},
        {{uir, 1, 5, 5, 2, 3, 96}, {uir, 4, 0, 3, 1, 2, 96}, {uir, 1, 3, 0, 1, 4, 96}},
        {{uir, 1, 3, 3, 2, 6, 128}, {uir, 1, 5, 5, 1, 4, 128}, {uir, 1, 0, 5, 1, 4, 128}, {uir, 1, 0, 5, 1, 3, 128},
         {uir, 2, 0, 3, 1, 4, 128}},
        {{cn, 1, 0, 1, 1, 1, 960}}},
       224, 0.875},
      {"m", 32,
       {{{er, 1, 0, 3, 2, 4, 48}},
        {{uir, 1, 3, 5, 2, 4, 80}, {uir, 1, 3, 3, 1, 2, 80}},
        {{uir, 1, 3, 5, 2, 6, 160}, {uir, 2, 3, 3, 1, 4, 160}, {uir, 1, 3, 5, 1, 4, 160}, {uir, 1, 3, 3, 1, 4, 160},
         {uir, 1, 3, 0, 1, 4, 160}, {uir, 1, 0, 0, 1, 2, 160}, {uir, 1, 3, 0, 1, 4, 160}},
        {{uir, 1, 5, 5, 2, 6, 256}, {uir, 1, 5, 5, 1, 4, 256}, {uir, 2, 3, 5, 1, 4, 256}, {uir, 1, 0, 0, 1, 4, 256},
         {uir, 1, 3, 0, 1, 4, 256}, {uir, 1, 3, 5, 1, 2, 256}, {uir, 1, 5, 5, 1, 4, 256}, {uir, 2, 0, 0, 1, 4, 256},
         {uir, 1, 5, 0, 1, 2, 256}},
        {{cn, 1, 0, 1, 1, 1, 960}}},
       224, 0.95},
      {"l", 24,
       {{{er, 1, 0, 3, 2, 4, 48}},
        {{uir, 1, 3, 5, 2, 4, 96}, {uir, 1, 3, 3, 1, 4, 96}},
        {{uir, 1, 3, 5, 2, 4, 192}, {uir, 3, 3, 3, 1, 4, 192}, {uir, 1, 3, 5, 1, 4, 192}, {uir, 5, 5, 3, 1, 4, 192},
         {uir, 1, 3, 0, 1, 4, 192}},
        {{uir, 4, 5, 5, 2, 4, 512}, {uir, 1, 5, 0, 1, 4, 512}, {uir, 1, 5, 3, 1, 4, 512}, {uir, 2, 5, 0, 1, 4, 512},
         {uir, 1, 5, 3, 1, 4, 512}, {uir, 1, 5, 5, 1, 4, 512}, {uir, 3, 5, 0, 1, 4, 512}},
        {{cn, 1, 0, 1, 1, 1, 960}}},
       256, 0.95},
  };
  return specs;
}

// timm's get_padding for symmetric padding.
int padding(int kernel, int stride) { return ((stride - 1) + (kernel - 1)) / 2; }

torch::nn::Conv2d conv(int in, int out, int kernel, int stride, int groups = 1) {
  return torch::nn::Conv2d(
      torch::nn::Conv2dOptions(in, out, kernel).stride(stride).padding(padding(kernel, stride)).groups(groups).bias(false));
}

}  // namespace

const std::vector<SizeSpec>& sizes() { return all_sizes(); }

const SizeSpec& size_spec(std::string_view size) {
  for (const auto& spec : all_sizes()) {
    if (spec.name == size) return spec;
  }
  throw ModelError(fmt::format("unknown MobileNetV4 size '{}' (sizes: s, m, l)", size));
}

int make_divisible(double value, int divisor) {
  int rounded = std::max(divisor, static_cast<int>(value + divisor / 2.0) / divisor * divisor);
  if (rounded < 0.9 * value) rounded += divisor;
  return rounded;
}

ConvNormActImpl::ConvNormActImpl(int in_channels, int out_channels, int kernel, int stride, int groups, bool act)
    : conv_(register_module("conv", conv(in_channels, out_channels, kernel, stride, groups))),
      bn_(register_module("bn", nn::SyncableBatchNorm2d(out_channels))), act_(act) {}

torch::Tensor ConvNormActImpl::forward(const torch::Tensor& x) {
  return act_ ? bn_->forward_relu(conv_(x)) : bn_(conv_(x));
}

BlockImpl::BlockImpl(const BlockDef& def, int in_channels, int stride) : type_(def.type) {
  const int out = def.out_channels;
  switch (def.type) {
    case BlockType::cn:  // no shipped block sets timm's `skip` flag
      conv_ = register_module("conv", conv(in_channels, out, def.kernel, stride));
      bn1_ = register_module("bn1", nn::SyncableBatchNorm2d(out));
      skip_ = false;
      break;
    case BlockType::er: {
      const int mid = make_divisible(in_channels * def.expansion);
      conv_ = register_module("conv_exp", conv(in_channels, mid, def.kernel, stride));
      bn1_ = register_module("bn1", nn::SyncableBatchNorm2d(mid));
      conv_pwl_ = register_module("conv_pwl", conv(mid, out, 1, 1));
      bn2_ = register_module("bn2", nn::SyncableBatchNorm2d(out));
      skip_ = in_channels == out && stride == 1;
      break;
    }
    case BlockType::uir: {
      // the start depthwise strides only where there is no middle one
      if (def.start_kernel) {
        dw_start_ = register_module("dw_start", ConvNormAct(in_channels, in_channels, def.start_kernel, def.kernel ? 1 : stride,
                                                            in_channels, /*act=*/false));
      }
      const int mid = make_divisible(in_channels * def.expansion);
      pw_exp_ = register_module("pw_exp", ConvNormAct(in_channels, mid, 1, 1, 1, /*act=*/true));
      if (def.kernel) dw_mid_ = register_module("dw_mid", ConvNormAct(mid, mid, def.kernel, stride, mid, /*act=*/true));
      pw_proj_ = register_module("pw_proj", ConvNormAct(mid, out, 1, 1, 1, /*act=*/false));
      skip_ = in_channels == out && stride == 1;
      break;
    }
  }
}

torch::Tensor BlockImpl::forward(const torch::Tensor& x) {
  torch::Tensor y;
  switch (type_) {
    case BlockType::cn:
      y = bn1_->forward_relu(conv_(x));
      break;
    case BlockType::er:
      y = bn2_(conv_pwl_(bn1_->forward_relu(conv_(x))));
      break;
    case BlockType::uir:
      y = dw_start_ ? dw_start_(x) : x;
      y = pw_exp_(y);
      if (dw_mid_) y = dw_mid_(y);
      y = pw_proj_(y);
      break;
  }
  return skip_ ? y + x : y;
}

ModelImpl::ModelImpl(std::string_view size, int class_count) {
  const SizeSpec& spec = size_spec(size);
  const int stem = make_divisible(spec.stem);
  conv_stem_ = register_module("conv_stem", conv(3, stem, 3, 2));
  bn1_ = register_module("bn1", nn::SyncableBatchNorm2d(stem));
  torch::nn::ModuleList blocks;
  int in_channels = stem;
  for (const auto& stage : spec.stages) {
    torch::nn::Sequential stage_blocks;
    bool first = true;
    for (const BlockDef& def : stage) {
      for (int r = 0; r < def.repeats; ++r) {
        BlockDef block = def;
        block.out_channels = make_divisible(def.out_channels);
        stage_blocks->push_back(Block(block, in_channels, first ? def.stride : 1));  // only a stage's first block strides
        in_channels = block.out_channels;
        first = false;
      }
    }
    blocks->push_back(stage_blocks);
    stages_.push_back(stage_blocks);
  }
  blocks_ = register_module("blocks", blocks);
  conv_head_ = register_module("conv_head", conv(in_channels, kHeadHidden, 1, 1));
  norm_head_ = register_module("norm_head", nn::SyncableBatchNorm2d(kHeadHidden));
  classifier_ = register_module("classifier", torch::nn::Linear(kHeadHidden, class_count));
}

torch::Tensor ModelImpl::features(const torch::Tensor& x) {
  torch::Tensor y = bn1_->forward_relu(conv_stem_(x));
  for (auto& stage : stages_) y = stage->forward(y);
  return y;
}

torch::Tensor ModelImpl::forward(const torch::Tensor& x) {
  torch::Tensor y = torch::adaptive_avg_pool2d(features(x), {1, 1});  // global_pool first, then conv_head
  y = norm_head_->forward_relu(conv_head_(y));
  return classifier_(y.flatten(1));
}

}  // namespace libreyolo::models::mobilenetv4
