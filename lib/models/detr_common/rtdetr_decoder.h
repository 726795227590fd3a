// RT-DETR's decoder (the reference's RTDETRTransformer): the encoder's maps projected and
// flattened, an encoder head that scores every position against grid anchors, the top-k positions
// as the queries (query selection), denoising queries in front of them in training, then decoder
// layers of self-attention, multi-scale deformable cross-attention (bilinear grid_sample per level)
// and a feed-forward block, each refining the boxes (iterative refinement) and scoring the classes.
// Submodule names follow the reference's weights.
#pragma once

#include "models/detr_common/criterion.h"
#include "models/detr_common/denoising.h"
#include "models/detr_common/hybrid_encoder.h"

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include <limits>
#include <utility>
#include <vector>

namespace libreyolo::models::detr {

// Linear layers with an activation between them ("layers"): ReLU, or DEIM's SiLU.
class MlpImpl : public torch::nn::Module {
 public:
  MlpImpl(int in, int hidden, int out, int layers, Activation activation = Activation::relu);
  torch::Tensor forward(torch::Tensor x);
  torch::nn::Linear& last() { return layers_.back(); }
  torch::nn::Linear& layer(std::size_t i) { return layers_[i]; }

 private:
  torch::nn::ModuleList list_{nullptr};
  std::vector<torch::nn::Linear> layers_;
  Activation activation_;
};
TORCH_MODULE(Mlp);

// (height, width) of each level of the flattened memory.
using SpatialShapes = std::vector<std::pair<std::int64_t, std::int64_t>>;

// Multi-scale deformable attention: each query samples `points` positions per level and head
// around its reference box (offsets scaled by the box's size), weighted by a softmax.
class DeformableAttentionImpl : public torch::nn::Module {
 public:
  DeformableAttentionImpl(int dim, int heads, int levels, int points);
  // query [B, Q, dim], reference [B, Q, 1, 4] (cx, cy, w, h), value [B, V, dim]
  torch::Tensor forward(const torch::Tensor& query, const torch::Tensor& reference, const torch::Tensor& value,
                        const SpatialShapes& shapes);

 private:
  torch::nn::Linear sampling_offsets_{nullptr}, attention_weights_{nullptr}, value_proj_{nullptr}, output_proj_{nullptr};
  int heads_, levels_, points_;
};
TORCH_MODULE(DeformableAttention);

class DecoderLayerImpl : public torch::nn::Module {
 public:
  DecoderLayerImpl(int dim, int heads, int feedforward, int levels, int points);
  torch::Tensor forward(const torch::Tensor& target, const torch::Tensor& reference, const torch::Tensor& memory,
                        const SpatialShapes& shapes, const torch::Tensor& attn_mask, const torch::Tensor& position);

 private:
  MultiheadAttention self_attn_{nullptr};
  DeformableAttention cross_attn_{nullptr};
  torch::nn::LayerNorm norm1_{nullptr}, norm2_{nullptr}, norm3_{nullptr};
  torch::nn::Linear linear1_{nullptr}, linear2_{nullptr};
};
TORCH_MODULE(DecoderLayer);

struct RtdetrDecoderOptions {
  int classes = 80;
  int in_channels = 256;  // the encoder's width (r101 and x: 384)
  int hidden = 256;
  int queries = 300;
  int layers = 3;  // r18: 3, r34: 4, r50 and up: 6
  int heads = 8;
  int feedforward = 1024;
  int levels = 3;
  int points = 4;
  int eval_layer = -1;  // the layer whose outputs eval returns (-1: the last; r50m: 2)
};

class RtdetrDecoderImpl : public torch::nn::Module {
 public:
  explicit RtdetrDecoderImpl(const RtdetrDecoderOptions& options);
  // Training (module in train mode): every layer's outputs, the encoder's proposals and, with
  // `denoising`, the denoising queries' outputs per layer. Eval: `last` only (eval_layer's; the
  // layers after it do not run).
  DetrOutputs forward(const std::vector<torch::Tensor>& features, const DenoisingQueries* denoising = nullptr);
  const RtdetrDecoderOptions& options() const { return options_; }

 private:
  void reset_parameters();

  RtdetrDecoderOptions options_;
  torch::nn::ModuleList input_proj_{nullptr}, layers_{nullptr}, dec_score_head_{nullptr}, dec_bbox_head_{nullptr};
  torch::nn::Embedding denoising_class_embed_{nullptr};
  Mlp query_pos_head_{nullptr}, enc_bbox_head_{nullptr};
  torch::nn::Sequential enc_output_{nullptr};  // its Linear (enc_output_linear_), then a LayerNorm
  torch::nn::Linear enc_output_linear_{nullptr};
  torch::nn::Linear enc_score_head_{nullptr};
};
TORCH_MODULE(RtdetrDecoder);

// The grid anchors of the flattened memory in inverse-sigmoid form (`invalid` where a coordinate
// lies within 0.01 of the image's border: RT-DETR's +inf, D-FINE's 1e4), and that validity as
// [1, V, 1] bool.
std::pair<torch::Tensor, torch::Tensor> grid_anchors(const SpatialShapes& shapes, const torch::Device& device,
                                                     double invalid = std::numeric_limits<double>::infinity());

}  // namespace libreyolo::models::detr
