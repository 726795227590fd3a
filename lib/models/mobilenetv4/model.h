// MobileNetV4 conv (s/m/l), as libreyolo 1.6.0 builds it (models/mobilenetv4/nn.py, a port of
// timm's mobilenetv4_conv_{small,medium,large}): a stride-2 stem, five stages of ConvBnAct (cn),
// EdgeResidual (er) and universal inverted residual (uir) blocks ending at 960 channels, then a
// head that pools first (global average, a 1x1 convolution to 1280, batch norm, ReLU) and one
// linear classifier. Module names follow its state dicts (conv_stem, bn1,
// blocks.{stage}.{i}.{conv,bn1 | conv_exp,bn1,conv_pwl,bn2 | dw_start,pw_exp,dw_mid,pw_proj.{conv,bn}},
// conv_head, norm_head, classifier). Batch norms at torch's defaults; ReLU throughout; no dropout.
#pragma once

#include <torch/nn/module.h>
#include "nn/sync_norm.h"

#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include <span>
#include <string_view>
#include <vector>

namespace libreyolo::models::mobilenetv4 {

enum class BlockType { cn, er, uir };

// One entry of timm's block strings (`uir_r4_a0_k3_s1_e2_c96`): type, repeats, start depthwise
// kernel (a, uir; 0: none), kernel (k: cn's, er's expansion, uir's middle depthwise; 0: none),
// the first repeat's stride, expansion ratio, output channels.
struct BlockDef {
  BlockType type;
  int repeats, start_kernel, kernel, stride;
  double expansion;
  int out_channels;
};

struct SizeSpec {
  std::string_view name;  // "s", "m", "l"
  int stem;
  std::vector<std::vector<BlockDef>> stages;
  int image_size;    // the size's default input (libreyolo's INPUT_SIZES)
  double crop_pct;   // validation resizes to image_size / crop_pct, then centre-crops
};

const std::vector<SizeSpec>& sizes();
// Throws ModelError for an unknown size.
const SizeSpec& size_spec(std::string_view size);

// timm's make_divisible(v, 8): v rounded to a multiple of 8, at least 8, never below 0.9 v.
int make_divisible(double value, int divisor = 8);

// conv (no bias) + bn (+ ReLU): timm's ConvNormAct.
class ConvNormActImpl : public torch::nn::Module {
 public:
  ConvNormActImpl(int in_channels, int out_channels, int kernel, int stride, int groups, bool act);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  torch::nn::Conv2d conv_{nullptr};
  nn::SyncableBatchNorm2d bn_{nullptr};
  bool act_;
};
TORCH_MODULE(ConvNormAct);

class BlockImpl : public torch::nn::Module {
 public:
  BlockImpl(const BlockDef& def, int in_channels, int stride);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  BlockType type_;
  bool skip_;
  torch::nn::Conv2d conv_{nullptr}, conv_pwl_{nullptr};  // cn: conv; er: conv_exp (in conv_), conv_pwl
  nn::SyncableBatchNorm2d bn1_{nullptr}, bn2_{nullptr};
  ConvNormAct dw_start_{nullptr}, pw_exp_{nullptr}, dw_mid_{nullptr}, pw_proj_{nullptr};  // uir
};
TORCH_MODULE(Block);

class ModelImpl : public torch::nn::Module {
 public:
  static constexpr int kHeadHidden = 1280;
  ModelImpl(std::string_view size, int class_count);
  // Logits [B, class_count] of images [B, 3, H, W].
  torch::Tensor forward(const torch::Tensor& x);
  // The blocks' last map [B, 960, H/32, W/32].
  torch::Tensor features(const torch::Tensor& x);

 private:
  torch::nn::Conv2d conv_stem_{nullptr}, conv_head_{nullptr};
  nn::SyncableBatchNorm2d bn1_{nullptr}, norm_head_{nullptr};
  torch::nn::ModuleList blocks_{nullptr};  // the stages, each a Sequential of blocks
  std::vector<torch::nn::Sequential> stages_;
  torch::nn::Linear classifier_{nullptr};
};
TORCH_MODULE(Model);

}  // namespace libreyolo::models::mobilenetv4
