// YOLOX (n/t/s/m/l/x): CSPDarknet backbone, PAFPN neck and the decoupled head, with the module
// names of the official/LibreYOLO weights (backbone.backbone.dark3..., head.cls_preds.0...).
#pragma once

#include "nn/conv.h"
#include "nn/csp.h"

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>

#include <string>
#include <string_view>
#include <vector>

namespace libreyolo::models::yolox {

struct SizeSpec {
  std::string_view name;
  double depth;
  double width;
  bool depthwise;
  int input_size;
};

// Throws ModelError for an unknown size.
const SizeSpec& size_spec(std::string_view size);

class CSPDarknetImpl : public torch::nn::Module {
 public:
  CSPDarknetImpl(double depth, double width, bool depthwise);
  std::vector<torch::Tensor> forward(const torch::Tensor& x);  // dark3, dark4, dark5

 private:
  nn::Focus stem_{nullptr};
  torch::nn::Sequential dark2_{nullptr}, dark3_{nullptr}, dark4_{nullptr}, dark5_{nullptr};
};
TORCH_MODULE(CSPDarknet);

class PafpnImpl : public torch::nn::Module {
 public:
  PafpnImpl(double depth, double width, bool depthwise);
  std::vector<torch::Tensor> forward(const torch::Tensor& x);  // P3, P4, P5

 private:
  CSPDarknet backbone_{nullptr};
  nn::BaseConv lateral_conv0_{nullptr}, reduce_conv1_{nullptr};
  nn::CSPLayer c3_p4_{nullptr}, c3_p3_{nullptr}, c3_n3_{nullptr}, c3_n4_{nullptr};
  torch::nn::AnyModule bu_conv2_, bu_conv1_;
};
TORCH_MODULE(Pafpn);

class HeadImpl : public torch::nn::Module {
 public:
  HeadImpl(int class_count, double width, bool depthwise);
  // Per level [B, 4 + 1 + nc, H, W]: box (raw), objectness and classes (raw logits, or sigmoid
  // probabilities when `probabilities`), as YOLOX orders them.
  std::vector<torch::Tensor> forward(const std::vector<torch::Tensor>& features, bool probabilities);
  void initialize_biases(double prior_probability);

 private:
  torch::nn::ModuleList stems_{nullptr}, cls_convs_{nullptr}, reg_convs_{nullptr};
  torch::nn::ModuleList cls_preds_{nullptr}, reg_preds_{nullptr}, obj_preds_{nullptr};
};
TORCH_MODULE(Head);

class ModelImpl : public torch::nn::Module {
 public:
  ModelImpl(std::string_view size, int class_count);
  // Training mode: raw per-level maps; eval mode: objectness and classes through sigmoid.
  std::vector<torch::Tensor> forward(const torch::Tensor& images);
  std::vector<torch::Tensor> forward_raw(const torch::Tensor& images);  // logits in eval mode too

  const SizeSpec& spec() const { return spec_; }
  int class_count() const { return class_count_; }
  static constexpr std::array<int, 3> kStrides{8, 16, 32};

 private:
  SizeSpec spec_;
  int class_count_;
  Pafpn backbone_{nullptr};
  Head head_{nullptr};
};
TORCH_MODULE(Model);

}  // namespace libreyolo::models::yolox
