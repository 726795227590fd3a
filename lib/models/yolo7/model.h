// YOLOv7-b as libreyolo 1.6.0 builds it (the MIT re-release's v7.yaml): ELAN blocks, MP
// downsampling, an SPPCSP whose pools run in series, RepConv (never fused into one kernel) and an
// implicit-knowledge detection head with three anchors per level. Module names follow LibreYOLO's
// state dicts (layers.{i}.conv.weight, layers.105.heads.{j}.implicit_a.implicit), so weights move
// between the two unchanged. Facts: docs/yolov7-reference-notes.md.
#pragma once

#include "nn/conv.h"

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>

#include <array>
#include <string_view>
#include <vector>

namespace libreyolo::models::yolo7 {

inline constexpr std::array<int, 3> kStrides{8, 16, 32};
inline constexpr int kAnchorsPerLevel = 3;
// v7.yaml's anchors in pixels, per level (P3/8, P4/16, P5/32), (w, h) each. Not in the state dict.
inline constexpr std::array<std::array<float, 6>, 3> kAnchors{{
    {12, 16, 19, 36, 40, 28},
    {36, 75, 76, 55, 72, 146},
    {142, 110, 192, 243, 459, 401},
}};
inline constexpr int kInputSize = 640;

// The anchors [levels, anchors, 2] in grid units (pixels / stride), decode_yolov5's form.
at::Tensor grid_anchors(const at::TensorOptions& options);

// SPPCSP: pre_conv (1x1, 3x3, 1x1) then 5, 9 and 13 max pools applied in series, post_conv over the
// four maps, merged with a 1x1 shortcut branch.
class SppcspImpl : public torch::nn::Module {
 public:
  SppcspImpl(int in_channels, int out_channels);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  torch::nn::Sequential pre_conv_{nullptr}, post_conv_{nullptr};
  nn::BaseConv short_conv_{nullptr}, merge_conv_{nullptr};
};
TORCH_MODULE(Sppcsp);

// RepConv: SiLU(BN(3x3 conv) + BN(1x1 conv)), kept as two branches.
class RepConvImpl : public torch::nn::Module {
 public:
  RepConvImpl(int in_channels, int out_channels);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  nn::BaseConv conv1_{nullptr}, conv2_{nullptr};
};
TORCH_MODULE(RepConv);

// One level of the head: implicit_m x (conv(x + implicit_a)), a biased 1x1 conv to
// anchors x (5 + nc) channels.
// A learned per-channel tensor [1, C, 1, 1] named `implicit`: added (ImplicitA, starts at 0) or
// multiplied (ImplicitM, starts at 1).
class ImplicitImpl : public torch::nn::Module {
 public:
  ImplicitImpl(int channels, double initial);
  torch::Tensor implicit;
};
TORCH_MODULE(Implicit);

class IDetectImpl : public torch::nn::Module {
 public:
  IDetectImpl(int in_channels, int class_count);
  torch::Tensor forward(const torch::Tensor& x);
  // LibreYOLO's prior (initialize_biases(0.01)): objectness and every class bias set to
  // -log((1 - p) / p), the box biases left as initialised.
  void initialize_biases(double prior);

 private:
  int class_count_;
  Implicit implicit_a_{nullptr};
  torch::nn::Conv2d head_conv_{nullptr};
  Implicit implicit_m_{nullptr};
};
TORCH_MODULE(IDetect);

class ModelImpl : public torch::nn::Module {
 public:
  explicit ModelImpl(int class_count);
  // Both modes: per level the raw map [B, anchors x (5 + nc), H, W] (channel a x (5 + nc) + k: box
  // 0..3, objectness 4, classes 5..), strides 8, 16, 32.
  std::vector<torch::Tensor> forward(const torch::Tensor& images);
  void initialize_biases(double prior = 0.01);
  int class_count() const { return class_count_; }

 private:
  struct Layer {
    enum Kind { conv, pool, upsample, concat, sppcsp, repconv, detect } kind;
    std::vector<int> from;  // module indices; -1: the input image
  };
  int class_count_;
  std::vector<Layer> plan_;
  torch::nn::ModuleList layers_{nullptr};  // "layers": 106 entries, the parameterless ones too
  torch::nn::ModuleList heads_{nullptr};   // layers.105.heads
};
TORCH_MODULE(Model);

}  // namespace libreyolo::models::yolo7
