#include "nn/conv.h"

#include "nn/bn_silu.h"
#include "nn/sync_norm.h"

#include <torch/nn/functional/activation.h>
#include <torch/nn/functional/upsampling.h>
#include <torch/nn/modules/container/any.h>

namespace libreyolo::nn {

BaseConvImpl::BaseConvImpl(int in_channels, int out_channels, int kernel, int stride, int groups, bool activation,
                           double bn_eps, double bn_momentum)
    : activation_(activation),
      in_channels_(in_channels),
      out_channels_(out_channels),
      kernel_(kernel),
      stride_(stride),
      groups_(groups) {
  conv_ = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(in_channels, out_channels, kernel)
                                                         .stride(stride)
                                                         .padding((kernel - 1) / 2)
                                                         .groups(groups)
                                                         .bias(false)));
  bn_ = register_module("bn", torch::nn::BatchNorm2d(
                                  torch::nn::BatchNorm2dOptions(out_channels).eps(bn_eps).momentum(bn_momentum)));
}

void BaseConvImpl::share_convolution_of(const BaseConvImpl& owner) {
  if (!borrowed_) unregister_module("conv");
  conv_ = owner.conv_;
  borrowed_ = true;
}

torch::Tensor BaseConvImpl::forward(const torch::Tensor& x) {
  torch::Tensor y = conv_(x);
  const bool synced = sync_ && bn_ && bn_->is_training();
  if (activation_ && bn_ && fused_bn_silu_applies(y, *bn_)) {
    if (!synced) return batch_norm_silu(y, *bn_);
    if (torch::Tensor z = sync_->forward_silu(y, *bn_); z.defined()) return z;
  }
  if (bn_) y = synced ? sync_->forward(y, *bn_) : bn_(y);
  return activation_ ? torch::silu(y) : y;
}

std::pair<torch::Tensor, torch::Tensor> BaseConvImpl::folded_weight_and_bias() const {
  const torch::Tensor weight = conv_->weight.detach();
  if (!bn_) return {weight, conv_->bias.detach()};
  const torch::Tensor scale = bn_->weight.detach() / torch::sqrt(bn_->running_var + bn_->options.eps());
  const torch::Tensor bias = bn_->bias.detach() - bn_->running_mean * scale;
  return {weight * scale.view({-1, 1, 1, 1}), bias};
}

torch::nn::Conv2dOptions BaseConvImpl::fused_options() const {
  return torch::nn::Conv2dOptions(in_channels_, out_channels_, kernel_)
      .stride(stride_)
      .padding((kernel_ - 1) / 2)
      .groups(groups_)
      .bias(true);
}

void BaseConvImpl::fuse() {
  if (!bn_) return;
  torch::NoGradGuard no_grad;
  const auto [weight, bias] = folded_weight_and_bias();
  torch::nn::Conv2d fused(fused_options());
  fused->weight.copy_(weight);
  fused->bias.copy_(bias);
  conv_ = borrowed_ ? register_module("conv", fused) : replace_module("conv", fused);
  borrowed_ = false;
  unregister_module("bn");
  bn_ = nullptr;
}

torch::Tensor SyncableBatchNorm2dImpl::forward(const torch::Tensor& x) {
  if (sync_ && is_training()) return sync_->forward(x, *this);
  return torch::nn::BatchNorm2dImpl::forward(x);
}

torch::Tensor SyncableBatchNorm2dImpl::forward_relu(const torch::Tensor& x) {
  if (!sync_ && fused_bn_relu_applies(x, *this)) return batch_norm_relu(x, *this);
  return torch::relu(forward(x));
}

std::size_t set_batch_norm_sync(torch::nn::Module& root, const std::shared_ptr<BatchNormSync>& sync) {
  std::size_t count = 0;
  for (const auto& module : root.modules(/*include_self=*/true)) {
    if (auto* conv = dynamic_cast<BaseConvImpl*>(module.get()); conv && !conv->fused()) {
      conv->set_batch_norm_sync(sync);
      ++count;
    } else if (auto* norm = dynamic_cast<SyncableBatchNorm2dImpl*>(module.get())) {
      norm->set_batch_norm_sync(sync);
      ++count;
    }
  }
  return count;
}

DWConvImpl::DWConvImpl(int in_channels, int out_channels, int kernel, int stride) {
  dconv_ = register_module("dconv", BaseConv(in_channels, in_channels, kernel, stride, in_channels));
  pconv_ = register_module("pconv", BaseConv(in_channels, out_channels, 1, 1));
}

torch::Tensor DWConvImpl::forward(const torch::Tensor& x) { return pconv_(dconv_(x)); }

torch::Tensor upsample_nearest_2x(const torch::Tensor& x) {
  return torch::nn::functional::interpolate(
      x, torch::nn::functional::InterpolateFuncOptions().scale_factor(std::vector<double>{2.0, 2.0}).mode(torch::kNearest));
}

torch::nn::AnyModule make_conv(int in_channels, int out_channels, int kernel, int stride, bool depthwise) {
  if (depthwise) return torch::nn::AnyModule(DWConv(in_channels, out_channels, kernel, stride));
  return torch::nn::AnyModule(BaseConv(in_channels, out_channels, kernel, stride));
}

}  // namespace libreyolo::nn
