// GELAN building blocks of YOLOv9 (names as in the LibreYOLO weights): RepConvN and its fused
// form, RepNBottleneck, RepNCSP, RepNCSPELAN, ELAN, the AConv/ADown downsamplers and SPPELAN.
#pragma once

#include "nn/conv.h"

#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/sequential.h>

namespace libreyolo::nn {

// 3x3 conv+BN plus 1x1 conv+BN, summed, then SiLU; fuse() merges both into one biased 3x3.
class RepConvNImpl : public torch::nn::Module {
 public:
  RepConvNImpl(int in_channels, int out_channels);
  torch::Tensor forward(const torch::Tensor& x);
  void fuse();

 private:
  BaseConv conv1_{nullptr};
  BaseConv conv2_{nullptr};
  torch::nn::Conv2d fused_{nullptr};
};
TORCH_MODULE(RepConvN);

class RepNBottleneckImpl : public torch::nn::Module {
 public:
  RepNBottleneckImpl(int in_channels, int out_channels, bool shortcut);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  RepConvN cv1_{nullptr};
  BaseConv cv2_{nullptr};
  bool add_;
};
TORCH_MODULE(RepNBottleneck);

class RepNCSPImpl : public torch::nn::Module {
 public:
  RepNCSPImpl(int in_channels, int out_channels, int depth);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  BaseConv cv1_{nullptr}, cv2_{nullptr}, cv3_{nullptr};
  torch::nn::Sequential m_{nullptr};
};
TORCH_MODULE(RepNCSP);

// cv1 -> split in two; cv2 and cv3 chained on the second half; concat all four; cv4.
// (in, part, part/2, out, depth) as LibreYOLO's constructor takes them.
class RepNCSPELANImpl : public torch::nn::Module {
 public:
  RepNCSPELANImpl(int in_channels, int part_channels, int hidden_channels, int out_channels, int depth);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  BaseConv cv1_{nullptr}, cv4_{nullptr};
  torch::nn::Sequential cv2_{nullptr}, cv3_{nullptr};
};
TORCH_MODULE(RepNCSPELAN);

// The plain-conv ELAN of YOLOv9-t/s (depth 1).
class ELANImpl : public torch::nn::Module {
 public:
  ELANImpl(int in_channels, int part_channels, int hidden_channels, int out_channels);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  BaseConv cv1_{nullptr}, cv2_{nullptr}, cv3_{nullptr}, cv4_{nullptr};
};
TORCH_MODULE(ELAN);

// avg_pool(2, stride 1) then a stride-2 3x3 conv.
class AConvImpl : public torch::nn::Module {
 public:
  AConvImpl(int in_channels, int out_channels);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  BaseConv cv_{nullptr};
};
TORCH_MODULE(AConv);

// avg_pool(2, stride 1), split: stride-2 3x3 conv | max_pool(3, 2) + 1x1 conv, concat.
class ADownImpl : public torch::nn::Module {
 public:
  ADownImpl(int in_channels, int out_channels);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  BaseConv cv1_{nullptr}, cv2_{nullptr};
};
TORCH_MODULE(ADown);

// 1x1, three chained 5x5 max pools, concat the four, 1x1.
class SPPELANImpl : public torch::nn::Module {
 public:
  SPPELANImpl(int in_channels, int hidden_channels, int out_channels);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  BaseConv cv1_{nullptr}, cv5_{nullptr};
};
TORCH_MODULE(SPPELAN);

// Folds every BatchNorm into its conv and every RepConvN into one 3x3 (inference only).
void fuse_for_inference(torch::nn::Module& model);

}  // namespace libreyolo::nn
