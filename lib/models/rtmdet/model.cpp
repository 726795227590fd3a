#include "models/rtmdet/model.h"

#include "core/error.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/nn/init.h>

#include <cmath>
#include <memory>

namespace libreyolo::models::rtmdet {

namespace {

// (deepen, widen, exp_on_reg): models/rtmdet/nn.py's size table
constexpr std::array<SizeSpec, 5> kSizes{{
    {"t", 0.167, 0.375, false},
    {"s", 0.33, 0.5, false},
    {"m", 0.67, 0.75, true},
    {"l", 1.0, 1.0, true},
    {"x", 1.33, 1.25, true},
}};

int blocks(int base, double deepen) { return std::max(static_cast<int>(std::lround(base * deepen)), 1); }

}  // namespace

const SizeSpec& size_spec(std::string_view size) {
  for (const auto& spec : kSizes) {
    if (spec.name == size) return spec;
  }
  throw ModelError(fmt::format("rtmdet-{}: unknown size; sizes are t, s, m, l, x", size));
}

nn::BaseConv conv_bn_act(int in_channels, int out_channels, int kernel, int stride, int groups) {
  return nn::BaseConv(in_channels, out_channels, kernel, stride, groups, true, kBatchNormEps, kBatchNormMomentum);
}

DepthwiseSeparableImpl::DepthwiseSeparableImpl(int in_channels, int out_channels, int kernel) {
  depthwise_ = register_module("depthwise_conv", conv_bn_act(in_channels, in_channels, kernel, 1, in_channels));
  pointwise_ = register_module("pointwise_conv", conv_bn_act(in_channels, out_channels, 1, 1));
}

torch::Tensor DepthwiseSeparableImpl::forward(const torch::Tensor& x) { return pointwise_(depthwise_(x)); }

ChannelAttentionImpl::ChannelAttentionImpl(int channels) {
  fc_ = register_module("fc", torch::nn::Conv2d(torch::nn::Conv2dOptions(channels, channels, 1).bias(true)));
}

torch::Tensor ChannelAttentionImpl::forward(const torch::Tensor& x) {
  return x * at::hardsigmoid(fc_(at::adaptive_avg_pool2d(x, {1, 1})));
}

CspNextBlockImpl::CspNextBlockImpl(int in_channels, int out_channels, bool add_identity)
    : add_(add_identity && in_channels == out_channels) {
  conv1_ = register_module("conv1", conv_bn_act(in_channels, out_channels, 3, 1));
  conv2_ = register_module("conv2", DepthwiseSeparable(out_channels, out_channels, 5));
}

torch::Tensor CspNextBlockImpl::forward(const torch::Tensor& x) {
  const torch::Tensor y = conv2_(conv1_(x));
  return add_ ? y + x : y;
}

CspLayerImpl::CspLayerImpl(int in_channels, int out_channels, int count, bool add_identity, bool channel_attention) {
  const int mid = static_cast<int>(out_channels * 0.5);
  main_conv_ = register_module("main_conv", conv_bn_act(in_channels, mid, 1, 1));
  short_conv_ = register_module("short_conv", conv_bn_act(in_channels, mid, 1, 1));
  final_conv_ = register_module("final_conv", conv_bn_act(2 * mid, out_channels, 1, 1));
  blocks_ = register_module("blocks", torch::nn::Sequential());
  for (int i = 0; i < count; ++i) blocks_->push_back(CspNextBlock(mid, mid, add_identity));
  if (channel_attention) attention_ = register_module("attention", ChannelAttention(2 * mid));
}

torch::Tensor CspLayerImpl::forward(const torch::Tensor& x) {
  torch::Tensor y = torch::cat({blocks_->forward(main_conv_(x)), short_conv_(x)}, 1);
  if (attention_) y = attention_(y);
  return final_conv_(y);
}

SppBottleneckImpl::SppBottleneckImpl(int in_channels, int out_channels) {
  const int mid = in_channels / 2;
  conv1_ = register_module("conv1", conv_bn_act(in_channels, mid, 1, 1));
  conv2_ = register_module("conv2", conv_bn_act(4 * mid, out_channels, 1, 1));
}

torch::Tensor SppBottleneckImpl::forward(const torch::Tensor& x) {
  const torch::Tensor y = conv1_(x);
  return conv2_(torch::cat({y, at::max_pool2d(y, {5, 5}, {1, 1}, {2, 2}), at::max_pool2d(y, {9, 9}, {1, 1}, {4, 4}),
                            at::max_pool2d(y, {13, 13}, {1, 1}, {6, 6})},
                           1));
}

ModelImpl::ModelImpl(std::string_view size, int class_count) : spec_(size_spec(size)), class_count_(class_count) {
  const double d = spec_.deepen, w = spec_.widen;
  const auto width = [w](int c) { return static_cast<int>(c * w); };
  auto backbone = register_module("backbone", std::make_shared<torch::nn::Module>());
  auto neck = register_module("neck", std::make_shared<torch::nn::Module>());
  auto head = register_module("head", std::make_shared<torch::nn::Module>());

  const int stem_half = static_cast<int>(64 * w / 2), stem = width(64);
  // Every module is built in libreyolo's order, one statement each (a call's arguments have no set
  // order): the same seed then draws the same initial weights (parity_rtmdet checks it).
  torch::nn::Sequential stem_layers;
  stem_layers->push_back(conv_bn_act(3, stem_half, 3, 2));
  stem_layers->push_back(conv_bn_act(stem_half, stem_half, 3, 1));
  stem_layers->push_back(conv_bn_act(stem_half, stem, 3, 1));
  stem_ = backbone->register_module("stem", stem_layers);
  const std::array<int, 4> outs{width(128), width(256), width(512), width(1024)};
  const std::array<int, 4> depth{blocks(3, d), blocks(6, d), blocks(6, d), blocks(3, d)};
  std::array<torch::nn::Sequential*, 4> stages{&stage1_, &stage2_, &stage3_, &stage4_};
  int in = stem;
  for (int i = 0; i < 4; ++i) {
    torch::nn::Sequential stage(conv_bn_act(in, outs[i], 3, 2));
    if (i == 3) stage->push_back(SppBottleneck(outs[i], outs[i]));
    stage->push_back(CspLayer(outs[i], outs[i], depth[i], /*add_identity=*/i < 3, /*channel_attention=*/true));
    *stages[i] = backbone->register_module(fmt::format("stage{}", i + 1), stage);
    in = outs[i];
  }

  // PAFPN over (C3, C4, C5) = outs[1..3]
  const int c3 = outs[1], c4 = outs[2], c5 = outs[3], neck_blocks = blocks(3, d), feat = width(256);
  torch::nn::ModuleList reduce, top_down, down, bottom_up, out;
  for (const auto& [upper, lower] : {std::pair{c5, c4}, std::pair{c4, c3}}) {  // top-down: each level's reduce, then its block
    reduce->push_back(conv_bn_act(upper, lower, 1, 1));
    top_down->push_back(CspLayer(2 * lower, lower, neck_blocks, false, false));
  }
  for (const auto& [lower, upper] : {std::pair{c3, c4}, std::pair{c4, c5}}) {  // bottom-up
    down->push_back(conv_bn_act(lower, lower, 3, 2));
    bottom_up->push_back(CspLayer(2 * lower, upper, neck_blocks, false, false));
  }
  for (const int c : {c3, c4, c5}) out->push_back(conv_bn_act(c, feat, 3, 1));
  reduce_layers_ = neck->register_module("reduce_layers", reduce);
  top_down_blocks_ = neck->register_module("top_down_blocks", top_down);
  downsamples_ = neck->register_module("downsamples", down);
  bottom_up_blocks_ = neck->register_module("bottom_up_blocks", bottom_up);
  out_convs_ = neck->register_module("out_convs", out);

  // Head: per level two 3x3 towers (their convolutions level 0's), a class and a box 1x1 conv.
  cls_convs_ = head->register_module("cls_convs", torch::nn::ModuleList());
  reg_convs_ = head->register_module("reg_convs", torch::nn::ModuleList());
  rtm_cls_ = head->register_module("rtm_cls", torch::nn::ModuleList());
  rtm_reg_ = head->register_module("rtm_reg", torch::nn::ModuleList());
  for (std::size_t level = 0; level < kStrides.size(); ++level) {
    torch::nn::Sequential cls_tower, reg_tower;
    for (int i = 0; i < 2; ++i) {  // libreyolo's order: the class tower's i-th conv, then the box tower's
      cls_tower->push_back(conv_bn_act(feat, feat, 3, 1));
      reg_tower->push_back(conv_bn_act(feat, feat, 3, 1));
    }
    cls_convs_->push_back(cls_tower);
    reg_convs_->push_back(reg_tower);
  }
  for (std::size_t level = 0; level < kStrides.size(); ++level) rtm_cls_->push_back(torch::nn::Conv2d(torch::nn::Conv2dOptions(feat, class_count, 1).bias(true)));
  for (std::size_t level = 0; level < kStrides.size(); ++level) rtm_reg_->push_back(torch::nn::Conv2d(torch::nn::Conv2dOptions(feat, 4, 1).bias(true)));
  // The towers of levels 1 and 2 take level 0's convolutions; then RTMDetSepBNHead.init_weights:
  // each head conv once (the shared ones at level 0), N(0, 0.01) with zero bias, in module order,
  // and the class bias at the prior 0.01.
  for (auto* towers : {&cls_convs_, &reg_convs_}) {
    auto& first = *(*towers)[0]->as<torch::nn::Sequential>();
    for (std::size_t level = 1; level < kStrides.size(); ++level) {
      auto& tower = *(*towers)[level]->as<torch::nn::Sequential>();
      for (std::size_t i = 0; i < 2; ++i) tower[i]->as<nn::BaseConv>()->share_convolution_of(*first[i]->as<nn::BaseConv>());
    }
  }
  torch::NoGradGuard no_grad;
  std::vector<torch::nn::Conv2dImpl*> convs;
  for (auto* towers : {&cls_convs_, &reg_convs_}) {
    for (const auto& module : (*towers)[0]->modules(/*include_self=*/false)) {
      if (auto* conv = dynamic_cast<torch::nn::Conv2dImpl*>(module.get())) convs.push_back(conv);
    }
  }
  for (auto* list : {&rtm_cls_, &rtm_reg_}) {
    for (std::size_t level = 0; level < kStrides.size(); ++level) convs.push_back((*list)[level]->as<torch::nn::Conv2d>());
  }
  for (auto* conv : convs) {
    torch::nn::init::normal_(conv->weight, 0.0, 0.01);
    if (conv->bias.defined()) conv->bias.zero_();
  }
  for (std::size_t level = 0; level < kStrides.size(); ++level) rtm_cls_[level]->as<torch::nn::Conv2d>()->bias.fill_(-std::log(99.0));
}

std::vector<torch::Tensor> ModelImpl::forward(const torch::Tensor& images) {
  const auto conv = [](torch::nn::ModuleList& list, std::size_t i, const torch::Tensor& x) { return list[i]->as<nn::BaseConv>()->forward(x); };
  const auto csp = [](torch::nn::ModuleList& list, std::size_t i, const torch::Tensor& x) { return list[i]->as<CspLayer>()->forward(x); };
  const torch::Tensor s1 = stage1_->forward(stem_->forward(images));
  const torch::Tensor c3 = stage2_->forward(s1), c4 = stage3_->forward(c3), c5 = stage4_->forward(c4);
  const torch::Tensor r5 = conv(reduce_layers_, 0, c5);
  const torch::Tensor t4 = csp(top_down_blocks_, 0, torch::cat({nn::upsample_nearest_2x(r5), c4}, 1));
  const torch::Tensor r4 = conv(reduce_layers_, 1, t4);
  const torch::Tensor t3 = csp(top_down_blocks_, 1, torch::cat({nn::upsample_nearest_2x(r4), c3}, 1));
  const torch::Tensor n4 = csp(bottom_up_blocks_, 0, torch::cat({conv(downsamples_, 0, t3), r4}, 1));
  const torch::Tensor n5 = csp(bottom_up_blocks_, 1, torch::cat({conv(downsamples_, 1, n4), r5}, 1));
  const std::array<torch::Tensor, 3> features{conv(out_convs_, 0, t3), conv(out_convs_, 1, n4), conv(out_convs_, 2, n5)};
  std::vector<torch::Tensor> maps;
  for (std::size_t level = 0; level < features.size(); ++level) {
    const torch::Tensor cls = rtm_cls_[level]->as<torch::nn::Conv2d>()->forward(cls_convs_[level]->as<torch::nn::Sequential>()->forward(features[level]));
    torch::Tensor reg = rtm_reg_[level]->as<torch::nn::Conv2d>()->forward(reg_convs_[level]->as<torch::nn::Sequential>()->forward(features[level]));
    reg = (spec_.exp_on_reg ? reg.exp() : reg) * kStrides[level];
    maps.push_back(torch::cat({reg, cls}, 1));
  }
  return maps;
}

}  // namespace libreyolo::models::rtmdet
