#include "nn/gelan.h"

#include <torch/nn/functional/pooling.h>

namespace libreyolo::nn {

namespace {
torch::Tensor average_pool_2(const torch::Tensor& x) {
  return torch::avg_pool2d(x, 2, 1, 0, /*ceil_mode=*/false, /*count_include_pad=*/true);
}
}  // namespace

RepConvNImpl::RepConvNImpl(int in_channels, int out_channels) {
  conv1_ = register_module("conv1", BaseConv(in_channels, out_channels, 3, 1, 1, false));
  conv2_ = register_module("conv2", BaseConv(in_channels, out_channels, 1, 1, 1, false));
}

torch::Tensor RepConvNImpl::forward(const torch::Tensor& x) {
  if (fused_) return torch::silu(fused_(x));
  return torch::silu(conv1_(x) + conv2_(x));
}

void RepConvNImpl::fuse() {
  if (fused_) return;
  torch::NoGradGuard no_grad;
  const auto [weight3, bias3] = conv1_->folded_weight_and_bias();
  const auto [weight1, bias1] = conv2_->folded_weight_and_bias();
  fused_ = torch::nn::Conv2d(conv1_->fused_options());
  fused_->weight.copy_(weight3 + torch::constant_pad_nd(weight1, {1, 1, 1, 1}));
  fused_->bias.copy_(bias3 + bias1);
  register_module("conv", fused_);
  unregister_module("conv1");
  unregister_module("conv2");
}

RepNBottleneckImpl::RepNBottleneckImpl(int in_channels, int out_channels, bool shortcut)
    : add_(shortcut && in_channels == out_channels) {
  cv1_ = register_module("cv1", RepConvN(in_channels, out_channels));
  cv2_ = register_module("cv2", BaseConv(out_channels, out_channels, 3, 1));
}

torch::Tensor RepNBottleneckImpl::forward(const torch::Tensor& x) {
  torch::Tensor y = cv2_(cv1_(x));
  return add_ ? x + y : y;
}

RepNCSPImpl::RepNCSPImpl(int in_channels, int out_channels, int depth) {
  const int hidden = static_cast<int>(out_channels * 0.5);
  cv1_ = register_module("cv1", BaseConv(in_channels, hidden, 1, 1));
  cv2_ = register_module("cv2", BaseConv(in_channels, hidden, 1, 1));
  cv3_ = register_module("cv3", BaseConv(2 * hidden, out_channels, 1, 1));
  m_ = torch::nn::Sequential();
  for (int i = 0; i < depth; ++i) m_->push_back(RepNBottleneck(hidden, hidden, true));
  register_module("m", m_);
}

torch::Tensor RepNCSPImpl::forward(const torch::Tensor& x) {
  return cv3_(torch::cat({m_->forward(cv1_(x)), cv2_(x)}, 1));
}

RepNCSPELANImpl::RepNCSPELANImpl(int in_channels, int part_channels, int hidden_channels, int out_channels, int depth) {
  cv1_ = register_module("cv1", BaseConv(in_channels, part_channels, 1, 1));
  cv2_ = torch::nn::Sequential(RepNCSP(part_channels / 2, hidden_channels, depth),
                               BaseConv(hidden_channels, hidden_channels, 3, 1));
  cv3_ = torch::nn::Sequential(RepNCSP(hidden_channels, hidden_channels, depth),
                               BaseConv(hidden_channels, hidden_channels, 3, 1));
  register_module("cv2", cv2_);
  register_module("cv3", cv3_);
  cv4_ = register_module("cv4", BaseConv(part_channels + 2 * hidden_channels, out_channels, 1, 1));
}

torch::Tensor RepNCSPELANImpl::forward(const torch::Tensor& x) {
  std::vector<torch::Tensor> parts = cv1_(x).chunk(2, 1);
  parts.push_back(cv2_->forward(parts.back()));
  parts.push_back(cv3_->forward(parts.back()));
  return cv4_(torch::cat(parts, 1));
}

ELANImpl::ELANImpl(int in_channels, int part_channels, int hidden_channels, int out_channels) {
  cv1_ = register_module("cv1", BaseConv(in_channels, part_channels, 1, 1));
  cv2_ = register_module("cv2", BaseConv(part_channels / 2, hidden_channels, 3, 1));
  cv3_ = register_module("cv3", BaseConv(hidden_channels, hidden_channels, 3, 1));
  cv4_ = register_module("cv4", BaseConv(part_channels + 2 * hidden_channels, out_channels, 1, 1));
}

torch::Tensor ELANImpl::forward(const torch::Tensor& x) {
  std::vector<torch::Tensor> parts = cv1_(x).chunk(2, 1);
  parts.push_back(cv2_(parts.back()));
  parts.push_back(cv3_(parts.back()));
  return cv4_(torch::cat(parts, 1));
}

AConvImpl::AConvImpl(int in_channels, int out_channels) {
  cv_ = register_module("cv", BaseConv(in_channels, out_channels, 3, 2));
}

torch::Tensor AConvImpl::forward(const torch::Tensor& x) { return cv_(average_pool_2(x)); }

ADownImpl::ADownImpl(int in_channels, int out_channels) {
  cv1_ = register_module("cv1", BaseConv(in_channels / 2, out_channels / 2, 3, 2));
  cv2_ = register_module("cv2", BaseConv(in_channels / 2, out_channels / 2, 1, 1));
}

torch::Tensor ADownImpl::forward(const torch::Tensor& x) {
  const auto halves = average_pool_2(x).chunk(2, 1);
  return torch::cat({cv1_(halves[0]), cv2_(torch::max_pool2d(halves[1], 3, 2, 1))}, 1);
}

SPPELANImpl::SPPELANImpl(int in_channels, int hidden_channels, int out_channels) {
  cv1_ = register_module("cv1", BaseConv(in_channels, hidden_channels, 1, 1));
  cv5_ = register_module("cv5", BaseConv(4 * hidden_channels, out_channels, 1, 1));
}

torch::Tensor SPPELANImpl::forward(const torch::Tensor& x) {
  std::vector<torch::Tensor> features{cv1_(x)};
  for (int i = 0; i < 3; ++i) features.push_back(torch::max_pool2d(features.back(), 5, 1, 2));
  return cv5_(torch::cat(features, 1));
}

void fuse_for_inference(torch::nn::Module& model) {
  for (const auto& module : model.modules()) {
    if (auto* rep = dynamic_cast<RepConvNImpl*>(module.get())) rep->fuse();
  }
  for (const auto& module : model.modules()) {
    if (auto* conv = dynamic_cast<BaseConvImpl*>(module.get())) conv->fuse();
  }
}

}  // namespace libreyolo::nn
