#include "nn/csp.h"

#include <torch/nn/functional/pooling.h>

namespace libreyolo::nn {

FocusImpl::FocusImpl(int in_channels, int out_channels, int kernel) {
  conv_ = register_module("conv", BaseConv(in_channels * 4, out_channels, kernel, 1));
}

torch::Tensor FocusImpl::forward(const torch::Tensor& x) {
  using torch::indexing::Slice;
  const auto top_left = x.index({"...", Slice(0, torch::indexing::None, 2), Slice(0, torch::indexing::None, 2)});
  const auto top_right = x.index({"...", Slice(0, torch::indexing::None, 2), Slice(1, torch::indexing::None, 2)});
  const auto bottom_left = x.index({"...", Slice(1, torch::indexing::None, 2), Slice(0, torch::indexing::None, 2)});
  const auto bottom_right = x.index({"...", Slice(1, torch::indexing::None, 2), Slice(1, torch::indexing::None, 2)});
  return conv_(torch::cat({top_left, bottom_left, top_right, bottom_right}, 1));
}

BottleneckImpl::BottleneckImpl(int in_channels, int out_channels, bool shortcut, double expansion, bool depthwise)
    : add_(shortcut && in_channels == out_channels) {
  const int hidden = static_cast<int>(out_channels * expansion);
  conv1_ = register_module("conv1", BaseConv(in_channels, hidden, 1, 1));
  conv2_ = make_conv(hidden, out_channels, 3, 1, depthwise);
  register_module("conv2", conv2_.ptr());
}

torch::Tensor BottleneckImpl::forward(const torch::Tensor& x) {
  torch::Tensor y = conv2_.forward(conv1_(x));
  return add_ ? y + x : y;
}

CSPLayerImpl::CSPLayerImpl(int in_channels, int out_channels, int depth, bool shortcut, bool depthwise) {
  const int hidden = static_cast<int>(out_channels * 0.5);
  conv1_ = register_module("conv1", BaseConv(in_channels, hidden, 1, 1));
  conv2_ = register_module("conv2", BaseConv(in_channels, hidden, 1, 1));
  conv3_ = register_module("conv3", BaseConv(2 * hidden, out_channels, 1, 1));
  m_ = torch::nn::Sequential();
  for (int i = 0; i < depth; ++i) m_->push_back(Bottleneck(hidden, hidden, shortcut, 1.0, depthwise));
  register_module("m", m_);
}

torch::Tensor CSPLayerImpl::forward(const torch::Tensor& x) {
  return conv3_(torch::cat({m_->forward(conv1_(x)), conv2_(x)}, 1));
}

SPPBottleneckImpl::SPPBottleneckImpl(int in_channels, int out_channels) {
  const int hidden = in_channels / 2;
  conv1_ = register_module("conv1", BaseConv(in_channels, hidden, 1, 1));
  conv2_ = register_module("conv2", BaseConv(hidden * 4, out_channels, 1, 1));
}

torch::Tensor SPPBottleneckImpl::forward(const torch::Tensor& x) {
  const torch::Tensor y = conv1_(x);
  // The 5, 9 and 13 max pools (stride 1, same padding) as a 5×5 pool applied once, twice and three
  // times: a 5×5 window of 5×5 window maxima is the 9×9 window's maximum, so the values are the
  // same (SPPF's identity) for 75 comparisons per output instead of 275.
  std::vector<torch::Tensor> parts{y};
  for (int i = 0; i < 3; ++i) parts.push_back(torch::max_pool2d(parts.back(), 5, 1, 2));
  return conv2_(torch::cat(parts, 1));
}

}  // namespace libreyolo::nn
