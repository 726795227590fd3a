// YOLOv9 (t/s/m/c) as LibreYOLO builds it: GELAN backbone (Backbone9), PAN neck (Neck9) and the
// anchor-free DFL head DDetect (grouped box towers, class width max(ch0, min(nc, 100))). Module
// names match LibreYOLO's weights (backbone.elan2.cv2.0.m.1.cv1.conv1.conv.weight, head.cv3.0.2.bias).
#pragma once

#include "nn/conv.h"
#include "nn/gelan.h"

#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/container/modulelist.h>

#include <array>
#include <string_view>
#include <vector>

namespace libreyolo::models::yolo9 {

inline constexpr int kRegMax = 16;

struct SizeSpec {
  std::string_view name;
  int conv0, conv1;
  bool first_block_elan;  // ELAN (t/s) or RepNCSPELAN (m/c)
  int first_block_out, first_block_part;
  bool adown;             // ADown (c) or AConv downsampling
  std::array<std::array<int, 3>, 3> stages;  // (down out, elan out, elan part)
  int spp_out;
  int depth;
  std::array<int, 2> neck_up1, neck_up2;      // (out, part)
  int neck_down1_out;
  std::array<int, 2> neck_down1;
  int neck_down2_out;
  std::array<int, 2> neck_down2;
  std::array<int, 3> head_channels;
};

const SizeSpec& size_spec(std::string_view size);

// The class towers' width the head formula gives for `class_count` classes: max(ch0, min(nc, 100)).
int class_tower_width(std::string_view size, int class_count);

// True for a state-dict name of the PGI auxiliary branch (aux.*, aux_head.*).
bool is_aux_tensor(std::string_view name);

class Backbone9Impl : public torch::nn::Module {
 public:
  explicit Backbone9Impl(const SizeSpec& spec);
  std::vector<torch::Tensor> forward(const torch::Tensor& x);  // P3, P4, P5 (after SPPELAN)
  std::vector<torch::Tensor> forward_with_b5(const torch::Tensor& x);  // + B5, the stage-4 output before SPPELAN

 private:
  nn::BaseConv conv0_{nullptr}, conv1_{nullptr};
  torch::nn::AnyModule elan1_, down2_, down3_, down4_;
  nn::RepNCSPELAN elan2_{nullptr}, elan3_{nullptr}, elan4_{nullptr};
  nn::SPPELAN spp_{nullptr};
};
TORCH_MODULE(Backbone9);

class Neck9Impl : public torch::nn::Module {
 public:
  explicit Neck9Impl(const SizeSpec& spec);
  std::vector<torch::Tensor> forward(const std::vector<torch::Tensor>& features);

 private:
  nn::RepNCSPELAN elan_up1_{nullptr}, elan_up2_{nullptr}, elan_down1_{nullptr}, elan_down2_{nullptr};
  torch::nn::AnyModule down1_, down2_;
};
TORCH_MODULE(Neck9);

class DDetectImpl : public torch::nn::Module {
 public:
  // class_hidden: the class towers' width; 0 = max(ch0, min(nc, 100)).
  DDetectImpl(int class_count, const std::array<int, 3>& channels, int class_hidden = 0);
  // Per level [B, 4*16 + nc, H, W]: box distribution logits then class logits.
  std::vector<torch::Tensor> forward(const std::vector<torch::Tensor>& features);

 private:
  torch::nn::ModuleList cv2_{nullptr}, cv3_{nullptr};
};
TORCH_MODULE(DDetect);

// PGI's auxiliary FPN, used only in training (LibreYOLO's AuxNeck): SPPELAN on the pre-SPP B5, then
// top-down with the backbone's P4 and P3, each through a RepNCSPELAN.
class AuxNeck9Impl : public torch::nn::Module {
 public:
  explicit AuxNeck9Impl(const SizeSpec& spec);
  std::vector<torch::Tensor> forward(const torch::Tensor& p3, const torch::Tensor& p4, const torch::Tensor& b5);

 private:
  nn::SPPELAN spp_{nullptr};
  nn::RepNCSPELAN elan_a4_{nullptr}, elan_a3_{nullptr};
};
TORCH_MODULE(AuxNeck9);

class ModelImpl : public torch::nn::Module {
 public:
  ModelImpl(std::string_view size, int class_count, int class_hidden = 0);
  std::vector<torch::Tensor> forward(const torch::Tensor& images);  // raw per-level maps
  void fuse();  // BatchNorm folding and RepConvN merging, for inference

  // Attaches the PGI auxiliary branch (modules `aux`, `aux_head`, after `head` as in LibreYOLO's
  // state_dict); once only. forward() never runs it; forward_with_aux() returns (main, aux) maps.
  void enable_aux();
  bool has_aux() const { return !aux_head_.is_empty(); }
  std::pair<std::vector<torch::Tensor>, std::vector<torch::Tensor>> forward_with_aux(const torch::Tensor& images);

  const SizeSpec& spec() const { return spec_; }
  int class_count() const { return class_count_; }
  static constexpr std::array<int, 3> kStrides{8, 16, 32};

 private:
  SizeSpec spec_;
  int class_count_;
  Backbone9 backbone_{nullptr};
  Neck9 neck_{nullptr};
  DDetect head_{nullptr};
  AuxNeck9 aux_{nullptr};
  DDetect aux_head_{nullptr};
};
TORCH_MODULE(Model);

}  // namespace libreyolo::models::yolo9
