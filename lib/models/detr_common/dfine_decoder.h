// D-FINE's decoder (the reference's DFINETransformer), shared by DEIM (its DEIMTransformer: SiLU
// in place of ReLU): query selection as RT-DETR's
// (the encoder's top-k positions against grid anchors, denoising queries in front in training),
// then layers of self-attention, multi-scale deformable cross-attention without value or output
// projections (a per-level point count, bilinear grid_sample) merged by a gate, and a feed-forward
// block. The first layer's boxes come from a plain box head ("pre" boxes); every layer then refines
// a distribution over reg_max + 1 bins per box edge (Fine-grained Distribution Refinement: each
// layer adds to the previous layer's logits), integrated against a non-uniform weighting W(n) into
// edge offsets of the first layer's box; a localisation-quality head (LQE) adds the distribution's
// top-4 statistics to the class scores. Submodule, parameter and buffer names follow the
// reference's weights (decoder.layers.<i>.gateway, decoder.lqe_layers, up, reg_scale, anchors,
// valid_mask, ...).
#pragma once

#include "models/detr_common/criterion.h"
#include "models/detr_common/denoising.h"
#include "models/detr_common/hybrid_encoder.h"
#include "models/detr_common/rtdetr_decoder.h"

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include <vector>

namespace libreyolo::models::detr {

// One decoder level's outputs with its distribution: logits [B, Q, C], boxes [B, Q, 4] (cx, cy, w,
// h, normalised), corners [B, Q, 4 * (reg_max + 1)] (the edge distributions' logits) and references
// [B, Q, 4] (the first layer's boxes, which every layer's offsets apply to).
struct FdrLevel {
  at::Tensor logits, boxes, corners, references;
};

struct DfineOutputs {
  FdrLevel last;                     // the matching queries at the last layer (eval: logits and boxes only)
  std::vector<FdrLevel> auxiliary;   // the earlier layers
  DetrLevel pre;                     // the first layer's plain box head, and its scores
  DetrLevel encoder;                 // the encoder's top-k proposals
  std::vector<FdrLevel> denoising;   // every layer's denoising queries (empty: none)
  DetrLevel denoising_pre;
  DenoisingMatch denoising_match;
  at::Tensor up, reg_scale;          // the decoder's W(n) parameters, which the loss reads (training)
};

// W(n): reg_max + 1 edge offsets, 0 in the middle, growing geometrically to +-up * reg_scale and
// +-2 * up * reg_scale at the ends, computed with the reference's float32 operations.
at::Tensor fdr_weighting(std::int64_t reg_max, const at::Tensor& up, const at::Tensor& reg_scale);
// Edge offsets (left, top, right, bottom, in units of W) applied to (cx, cy, w, h) boxes.
at::Tensor fdr_distance_to_box(const at::Tensor& points, const at::Tensor& distance, const at::Tensor& reg_scale);

struct DfineDecoderOptions {
  int classes = 80;
  std::vector<int> in_channels{256, 256, 256};  // the encoder's maps (x: 384, projected to hidden)
  int hidden = 256;
  int queries = 300;
  int layers = 6;
  int heads = 8;
  int feedforward = 1024;
  std::vector<int> points{3, 6, 3};  // sampling points per level and head
  int reg_max = 32;
  double reg_scale = 4.0;
  Activation activation = Activation::relu;      // the layers' feed-forward and the quality heads (DEIM: SiLU)
  Activation mlp_activation = Activation::relu;  // the box and position heads (DEIM: SiLU)
  int eval_size = 640;  // the square size whose grid anchors the weights hold (the reference's eval_spatial_size)
  std::vector<int> strides{8, 16, 32};
};

class DfineDecoderImpl : public torch::nn::Module {
 public:
  explicit DfineDecoderImpl(const DfineDecoderOptions& options);
  // Training (train mode): every layer's outputs, the pre boxes, the encoder's proposals and, with
  // `denoising`, the denoising queries' outputs. Eval: `last` (logits and boxes) only.
  DfineOutputs forward(const std::vector<torch::Tensor>& features, const DenoisingQueries* denoising = nullptr);
  const DfineDecoderOptions& options() const { return options_; }
  const at::Tensor& up() const { return up_; }
  const at::Tensor& reg_scale() const { return reg_scale_; }

 private:
  void reset_parameters();

  DfineDecoderOptions options_;
  torch::nn::ModuleList input_proj_{nullptr}, layers_{nullptr}, lqe_layers_{nullptr}, dec_score_head_{nullptr},
      dec_bbox_head_{nullptr};
  torch::nn::Embedding denoising_class_embed_{nullptr};
  Mlp query_pos_head_{nullptr}, enc_bbox_head_{nullptr}, pre_bbox_head_{nullptr};
  torch::nn::Sequential enc_output_{nullptr};
  torch::nn::Linear enc_output_linear_{nullptr}, enc_score_head_{nullptr};
  torch::nn::LayerNorm enc_output_norm_{nullptr};
  at::Tensor up_, reg_scale_;
};
TORCH_MODULE(DfineDecoder);

}  // namespace libreyolo::models::detr
