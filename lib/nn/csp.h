// CSPDarknet building blocks (YOLOX): Focus stem, residual Bottleneck, CSPLayer, SPPBottleneck.
#pragma once

#include "nn/conv.h"

#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/sequential.h>

namespace libreyolo::nn {

// Space-to-depth in the order (top-left, bottom-left, top-right, bottom-right), then a conv.
class FocusImpl : public torch::nn::Module {
 public:
  FocusImpl(int in_channels, int out_channels, int kernel);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  BaseConv conv_{nullptr};
};
TORCH_MODULE(Focus);

class BottleneckImpl : public torch::nn::Module {
 public:
  BottleneckImpl(int in_channels, int out_channels, bool shortcut, double expansion, bool depthwise);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  BaseConv conv1_{nullptr};
  torch::nn::AnyModule conv2_;
  bool add_;
};
TORCH_MODULE(Bottleneck);

// conv1 -> n bottlenecks, conv2 beside it, concat, conv3.
class CSPLayerImpl : public torch::nn::Module {
 public:
  CSPLayerImpl(int in_channels, int out_channels, int depth, bool shortcut, bool depthwise);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  BaseConv conv1_{nullptr};
  BaseConv conv2_{nullptr};
  BaseConv conv3_{nullptr};
  torch::nn::Sequential m_{nullptr};
};
TORCH_MODULE(CSPLayer);

// 1x1 to half, max pools 5/9/13 (stride 1) beside the identity, concat, 1x1.
class SPPBottleneckImpl : public torch::nn::Module {
 public:
  SPPBottleneckImpl(int in_channels, int out_channels);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  BaseConv conv1_{nullptr};
  BaseConv conv2_{nullptr};
};
TORCH_MODULE(SPPBottleneck);

}  // namespace libreyolo::nn
