// The DETRs' hybrid encoder: each backbone map projected to `hidden` channels (1x1 conv + BN), a
// transformer layer over the coarsest map (AIFI, with a 2-D sine-cosine position embedding), then a
// top-down and a bottom-up fusion of the maps (CCFM). RT-DETR fuses with CSP blocks of RepVGG
// blocks and strided 3x3 convs; D-FINE and DEIM with RepNCSPELAN4 blocks (a split, two CSP
// branches and a 1x1 aggregation) and SCDown (1x1, then a depthwise strided 3x3), without an
// activation on the lateral convs. Submodule names follow each reference's weights (input_proj,
// encoder.0.layers.0, lateral_convs, fpn_blocks, downsample_convs, pan_blocks).
#pragma once

#include "models/detr_common/presnet.h"

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include <vector>

namespace libreyolo::models::detr {

// A linear layer as PyTorch's Python computes it (at::linear: one fused matmul with the bias).
// LibTorch's C++ torch::nn::Linear multiplies, then adds the bias, for inputs of more than two
// dimensions: other roundings, so the DETR modules call this instead of its forward().
torch::Tensor linear(const torch::nn::Linear& layer, const torch::Tensor& x);

// Multi-head attention as torch.nn.MultiheadAttention computes it (batch first, packed input
// projection, names in_proj_weight, in_proj_bias, out_proj): the same operations in the same
// order, so that its outputs and gradients equal PyTorch's. `mask` [L, S]: bool (true: not
// attended) or an additive float mask; undefined for none.
class MultiheadAttentionImpl : public torch::nn::Module {
 public:
  MultiheadAttentionImpl(int embed_dim, int heads);
  torch::Tensor forward(const torch::Tensor& query, const torch::Tensor& key, const torch::Tensor& value,
                        const torch::Tensor& mask = {});

 private:
  torch::Tensor in_proj_weight_, in_proj_bias_;
  torch::nn::Linear out_proj_{nullptr};
  int heads_;
};
TORCH_MODULE(MultiheadAttention);

// A post-norm transformer encoder layer (self-attention, then a GELU feed-forward), dropout 0.
class EncoderLayerImpl : public torch::nn::Module {
 public:
  EncoderLayerImpl(int dim, int heads, int feedforward);
  torch::Tensor forward(const torch::Tensor& source, const torch::Tensor& position);

 private:
  MultiheadAttention self_attn_{nullptr};
  torch::nn::Linear linear1_{nullptr}, linear2_{nullptr};
  torch::nn::LayerNorm norm1_{nullptr}, norm2_{nullptr};
};
TORCH_MODULE(EncoderLayer);

// The reference's 2-D sine-cosine embedding of a w x h grid: [1, w * h, dim], the grid flattened
// with w as the outer index (as RT-DETR builds it).
torch::Tensor sincos_position_embedding(int w, int h, int dim, double temperature = 10000.0);

enum class FusionBlocks { csp_rep, elan };  // RT-DETR's; D-FINE's and DEIM's

struct HybridEncoderOptions {
  std::vector<int> in_channels{128, 256, 512};  // the backbone's maps, finest first (2 or 3)
  int hidden = 256;
  int heads = 8;
  int feedforward = 1024;
  double expansion = 0.5;   // the blocks' hidden share (RT-DETR r18, r34: 0.5; r50 and up: 1.0)
  FusionBlocks blocks = FusionBlocks::csp_rep;
  double depth_mult = 1.0;  // elan: round(3 * depth_mult) RepVGG blocks per CSP branch
};

class HybridEncoderImpl : public torch::nn::Module {
 public:
  explicit HybridEncoderImpl(const HybridEncoderOptions& options);
  // One map of `hidden` channels per input, at the inputs' strides.
  std::vector<torch::Tensor> forward(const std::vector<torch::Tensor>& features);
  // AIFI's position embedding for a w x h map on `device`: computed on the CPU as the references do,
  // copied once per size and device and kept. A copy from the host inside a CUDA graph's capture is
  // refused, and the warm-up before a capture runs the same shape, so a captured encoder reads the
  // kept tensor.
  torch::Tensor position_embedding(std::int64_t w, std::int64_t h, const torch::Device& device);

 private:
  HybridEncoderOptions options_;
  struct Position {
    std::int64_t w = 0, h = 0;
    torch::Tensor value;
  };
  std::vector<Position> positions_;
  torch::nn::ModuleList input_proj_{nullptr}, encoder_{nullptr};
  torch::nn::ModuleList lateral_convs_{nullptr}, fpn_blocks_{nullptr}, downsample_convs_{nullptr}, pan_blocks_{nullptr};
};
TORCH_MODULE(HybridEncoder);

}  // namespace libreyolo::models::detr
