// RTMDet (t/s/m/l/x) as libreyolo 1.6.0 builds it (mmdetection's): the CSPNeXt backbone (3x3 then
// depthwise 5x5 blocks, channel attention, a parallel-pooled SPP), the CSPNeXt PAFPN and the
// separated-BatchNorm head whose tower convolutions are shared across levels. BatchNorms keep
// PyTorch's defaults (eps 1e-5, momentum 0.1). Module names follow LibreYOLO's state dicts
// (backbone.stage1.1.main_conv.conv.weight, head.rtm_cls.0.weight); the shared convolutions are
// stored once, under level 0 (LibreYOLO's state dict repeats them under levels 1 and 2).
// Facts: docs/rtmdet-reference-notes.md.
#pragma once

#include "nn/conv.h"

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>

#include <array>
#include <string_view>
#include <vector>

namespace libreyolo::models::rtmdet {

struct SizeSpec {
  std::string_view name;
  double deepen;
  double widen;
  bool exp_on_reg;  // m/l/x: distances exp(raw) x stride; t/s: raw x stride
};

// Throws ModelError for an unknown size.
const SizeSpec& size_spec(std::string_view size);

inline constexpr std::array<int, 3> kStrides{8, 16, 32};
inline constexpr double kBatchNormEps = 1e-5;
inline constexpr double kBatchNormMomentum = 0.1;

// Conv (no bias) + BatchNorm (eps 1e-5, momentum 0.1) + SiLU.
nn::BaseConv conv_bn_act(int in_channels, int out_channels, int kernel, int stride, int groups = 1);

class DepthwiseSeparableImpl : public torch::nn::Module {
 public:
  DepthwiseSeparableImpl(int in_channels, int out_channels, int kernel);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  nn::BaseConv depthwise_{nullptr}, pointwise_{nullptr};
};
TORCH_MODULE(DepthwiseSeparable);

// x * hardsigmoid(fc(avgpool(x))), fc a biased 1x1 conv.
class ChannelAttentionImpl : public torch::nn::Module {
 public:
  explicit ChannelAttentionImpl(int channels);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  torch::nn::Conv2d fc_{nullptr};
};
TORCH_MODULE(ChannelAttention);

// conv1 3x3 then conv2 depthwise-separable 5x5, plus the input where add_identity.
class CspNextBlockImpl : public torch::nn::Module {
 public:
  CspNextBlockImpl(int in_channels, int out_channels, bool add_identity);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  nn::BaseConv conv1_{nullptr};
  DepthwiseSeparable conv2_{nullptr};
  bool add_;
};
TORCH_MODULE(CspNextBlock);

// final(attention(cat(blocks(main(x)), short(x)))), half the output's channels inside.
class CspLayerImpl : public torch::nn::Module {
 public:
  CspLayerImpl(int in_channels, int out_channels, int blocks, bool add_identity, bool channel_attention);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  nn::BaseConv main_conv_{nullptr}, short_conv_{nullptr}, final_conv_{nullptr};
  torch::nn::Sequential blocks_{nullptr};
  ChannelAttention attention_{nullptr};
};
TORCH_MODULE(CspLayer);

// conv1 1x1 to half, the input and its 5, 9 and 13 max pools side by side, conv2 1x1.
class SppBottleneckImpl : public torch::nn::Module {
 public:
  SppBottleneckImpl(int in_channels, int out_channels);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  nn::BaseConv conv1_{nullptr}, conv2_{nullptr};
};
TORCH_MODULE(SppBottleneck);

class ModelImpl : public torch::nn::Module {
 public:
  ModelImpl(std::string_view size, int class_count);
  // Both modes: per level [B, 4 + nc, H, W]: the left, top, right, bottom distances in input pixels
  // (already x stride; exp'ed for m/l/x), then the class logits. Strides 8, 16, 32.
  std::vector<torch::Tensor> forward(const torch::Tensor& images);
  const SizeSpec& spec() const { return spec_; }
  int class_count() const { return class_count_; }

 private:
  SizeSpec spec_;
  int class_count_;
  torch::nn::Sequential stem_{nullptr}, stage1_{nullptr}, stage2_{nullptr}, stage3_{nullptr}, stage4_{nullptr};
  torch::nn::ModuleList reduce_layers_{nullptr}, top_down_blocks_{nullptr}, downsamples_{nullptr}, bottom_up_blocks_{nullptr},
      out_convs_{nullptr};
  torch::nn::ModuleList cls_convs_{nullptr}, reg_convs_{nullptr}, rtm_cls_{nullptr}, rtm_reg_{nullptr};
};
TORCH_MODULE(Model);

}  // namespace libreyolo::models::rtmdet
