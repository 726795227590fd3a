#include "nn/conv.h"

#include <torch/nn/functional/activation.h>
#include <torch/nn/modules/container/any.h>

namespace libreyolo::nn {

BaseConvImpl::BaseConvImpl(int in_channels, int out_channels, int kernel, int stride, int groups) {
  conv_ = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(in_channels, out_channels, kernel)
                                                         .stride(stride)
                                                         .padding((kernel - 1) / 2)
                                                         .groups(groups)
                                                         .bias(false)));
  bn_ = register_module("bn", torch::nn::BatchNorm2d(
                                  torch::nn::BatchNorm2dOptions(out_channels).eps(kBatchNormEps).momentum(kBatchNormMomentum)));
}

torch::Tensor BaseConvImpl::forward(const torch::Tensor& x) { return torch::silu(bn_(conv_(x))); }

DWConvImpl::DWConvImpl(int in_channels, int out_channels, int kernel, int stride) {
  dconv_ = register_module("dconv", BaseConv(in_channels, in_channels, kernel, stride, in_channels));
  pconv_ = register_module("pconv", BaseConv(in_channels, out_channels, 1, 1));
}

torch::Tensor DWConvImpl::forward(const torch::Tensor& x) { return pconv_(dconv_(x)); }

torch::nn::AnyModule make_conv(int in_channels, int out_channels, int kernel, int stride, bool depthwise) {
  if (depthwise) return torch::nn::AnyModule(DWConv(in_channels, out_channels, kernel, stride));
  return torch::nn::AnyModule(BaseConv(in_channels, out_channels, kernel, stride));
}

}  // namespace libreyolo::nn
