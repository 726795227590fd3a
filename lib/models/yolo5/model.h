// YOLOv5 (n/s/m/l/x), the anchor-based network of the original repository (yolov5 7.0): a
// CSPDarknet of C3 blocks with SPPF, a PANet neck and the Detect head with three anchors per
// level. Module names follow its state dicts (model.{i}.cv1.conv.weight, model.24.anchors,
// model.24.m.0.weight), so weights move between the two unchanged.
#pragma once

#include "nn/conv.h"

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/sequential.h>

#include <array>
#include <string_view>
#include <vector>

namespace libreyolo::models::yolo5 {

struct SizeSpec {
  std::string_view name;
  double depth;
  double width;
};

// Throws ModelError for an unknown size.
const SizeSpec& size_spec(std::string_view size);

inline constexpr std::array<int, 3> kStrides{8, 16, 32};
inline constexpr int kAnchorsPerLevel = 3;
// yolov5s.yaml's anchors in pixels, per level (P3/8, P4/16, P5/32), (w, h) each.
inline constexpr std::array<std::array<float, 6>, 3> kDefaultAnchors{{
    {10, 13, 16, 30, 33, 23},
    {30, 61, 62, 45, 59, 119},
    {116, 90, 156, 198, 373, 326},
}};

// Bottleneck(c1, c2, shortcut, e=1.0): 1x1 then 3x3, added to the input when shortcut and c1 == c2.
class BottleneckImpl : public torch::nn::Module {
 public:
  BottleneckImpl(int in_channels, int out_channels, bool shortcut);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  nn::BaseConv cv1_{nullptr}, cv2_{nullptr};
  bool add_;
};
TORCH_MODULE(Bottleneck);

// C3: cv3(cat(m(cv1(x)), cv2(x))), with half the output's channels inside.
class C3Impl : public torch::nn::Module {
 public:
  C3Impl(int in_channels, int out_channels, int depth, bool shortcut);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  nn::BaseConv cv1_{nullptr}, cv2_{nullptr}, cv3_{nullptr};
  torch::nn::Sequential m_{nullptr};
};
TORCH_MODULE(C3);

// SPPF: a 5x5 max pool (stride 1) applied three times in series, the four maps concatenated.
class SppfImpl : public torch::nn::Module {
 public:
  SppfImpl(int in_channels, int out_channels);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  nn::BaseConv cv1_{nullptr}, cv2_{nullptr};
};
TORCH_MODULE(Sppf);

// Detect: per level a biased 1x1 conv to anchors x (5 + nc) channels; the anchors buffer holds
// (levels, anchors, 2) in grid units (pixels / stride), as yolov5's checkpoints do.
class DetectImpl : public torch::nn::Module {
 public:
  DetectImpl(int class_count, const std::array<int, 3>& in_channels);
  std::vector<torch::Tensor> forward(const std::vector<torch::Tensor>& features);
  // yolov5's prior: objectness for 8 objects per 640 image, classes at 0.6 / (nc - 0.99999).
  void initialize_biases();
  torch::Tensor anchors;

 private:
  int class_count_;
  torch::nn::ModuleList m_{nullptr};
};
TORCH_MODULE(Detect);

class ModelImpl : public torch::nn::Module {
 public:
  ModelImpl(std::string_view size, int class_count);
  // Both modes: per level the raw map [B, anchors x (5 + nc), H, W] (channel a x (5 + nc) + k: box
  // 0..3, objectness 4, classes 5..), then the anchors [levels, anchors, 2] in grid units, which
  // the decoder and the loss read (AutoAnchor may have changed them).
  std::vector<torch::Tensor> forward(const torch::Tensor& images);

  const SizeSpec& spec() const { return spec_; }
  int class_count() const { return class_count_; }

 private:
  SizeSpec spec_;
  int class_count_;
  torch::nn::ModuleList layers_{nullptr};  // "model": 25 entries, the parameterless ones too
  Detect detect_{nullptr};
};
TORCH_MODULE(Model);

}  // namespace libreyolo::models::yolo5
