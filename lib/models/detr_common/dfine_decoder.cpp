#include "models/detr_common/dfine_decoder.h"

#include "core/error.h"
#include "models/box_ops.h"
#include "models/detr_common/sampling.h"
#include "nn/sync_norm.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/nn/functional/vision.h>
#include <torch/nn/init.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include <cmath>
#include <numbers>
#include <numeric>

namespace libreyolo::models::detr {

namespace {

namespace F = torch::nn::functional;
using at::indexing::None;
using at::indexing::Slice;

// Deformable attention as D-FINE computes it: the memory itself is the value (no projections), each
// head samples points[l] positions on level l around its reference box (offsets scaled by the box
// size, 1 / points[l] and 0.5), one softmax over all of a head's points.
class FdrDeformableAttentionImpl : public torch::nn::Module {
 public:
  FdrDeformableAttentionImpl(int dim, int heads, const std::vector<int>& points) : heads_(heads), points_(points) {
    total_ = std::accumulate(points.begin(), points.end(), 0);
    sampling_offsets_ = register_module("sampling_offsets", torch::nn::Linear(dim, heads * total_ * 2));
    attention_weights_ = register_module("attention_weights", torch::nn::Linear(dim, heads * total_));
    std::vector<float> scale;
    for (const int n : points) scale.insert(scale.end(), static_cast<std::size_t>(n), 1.0F / static_cast<float>(n));
    points_scale_ = register_buffer("num_points_scale", at::tensor(scale));
    torch::NoGradGuard no_grad;  // the reference's initialisation: a circle of offsets per head, growing per point
    sampling_offsets_->weight.zero_();
    const at::Tensor thetas = at::arange(heads, at::kFloat) * (2.0 * std::numbers::pi / heads);
    at::Tensor grid = at::stack({thetas.cos(), thetas.sin()}, -1);
    grid = grid / std::get<0>(grid.abs().max(-1, true));
    grid = grid.reshape({heads, 1, 2}).tile({1, total_, 1});
    std::vector<at::Tensor> ranks;
    for (const int n : points) ranks.push_back(at::arange(1, n + 1));
    grid = grid * at::cat(ranks).reshape({1, -1, 1});
    sampling_offsets_->bias.copy_(grid.flatten());
    attention_weights_->weight.zero_();
    attention_weights_->bias.zero_();
  }

  // query [B, Q, dim]; reference [B, Q, 1, 4]; value: per level [B, heads, head_dim, H * W]
  torch::Tensor forward(const torch::Tensor& query, const torch::Tensor& reference, const std::vector<torch::Tensor>& value,
                        const SpatialShapes& shapes) {
    const int64_t batch = query.size(0), queries = query.size(1);
    const at::Tensor offsets = linear(sampling_offsets_, query).reshape({batch, queries, heads_, total_, 2});
    const at::Tensor weights =
        at::softmax(linear(attention_weights_, query).reshape({batch, queries, heads_, total_}), -1);
    const at::Tensor scale = points_scale_.to(query.scalar_type()).unsqueeze(-1);
    const at::Tensor offset = offsets * scale * reference.index({Slice(), Slice(), None, Slice(), Slice(2, None)}) * 0.5;
    const at::Tensor locations = reference.index({Slice(), Slice(), None, Slice(), Slice(None, 2)}) + offset;
    // the sampling: each level's values at its points, weighted and summed
    const int64_t channels = value.at(0).size(2);
    const at::Tensor grids = (2 * locations - 1).permute({0, 2, 1, 3, 4}).flatten(0, 1);
    std::vector<int64_t> counts(points_.begin(), points_.end());
    const auto per_level = grids.split_with_sizes(counts, -2);
    std::vector<at::Tensor> sampled;
    for (std::size_t level = 0; level < shapes.size(); ++level) {
      const auto [h, w] = shapes[level];
      const at::Tensor values = value[level].reshape({batch * heads_, channels, h, w});
      sampled.push_back(bilinear_sample(values, per_level[level]));
    }
    const at::Tensor w = weights.permute({0, 2, 1, 3}).reshape({batch * heads_, 1, queries, total_});
    return (at::cat(sampled, -1) * w).sum(-1).reshape({batch, heads_ * channels, queries}).permute({0, 2, 1});
  }

 private:
  torch::nn::Linear sampling_offsets_{nullptr}, attention_weights_{nullptr};
  at::Tensor points_scale_;
  int heads_, total_ = 0;
  std::vector<int> points_;
};
TORCH_MODULE(FdrDeformableAttention);

// The gate merging a layer's input with its cross-attention: norm(g1 * x1 + g2 * x2), (g1, g2) =
// sigmoid(linear(x1 ++ x2)) halves ("gate", "norm").
class GateImpl : public torch::nn::Module {
 public:
  explicit GateImpl(int dim)
      : gate_(register_module("gate", torch::nn::Linear(2 * dim, 2 * dim))),
        norm_(register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})))) {
    torch::NoGradGuard no_grad;  // bias_init_with_prob(0.5) = 0, weight 0
    gate_->bias.zero_();
    gate_->weight.zero_();
  }
  torch::Tensor forward(const torch::Tensor& x1, const torch::Tensor& x2) {
    const at::Tensor gates = at::sigmoid(linear(gate_, at::cat({x1, x2}, -1)));
    const auto halves = gates.chunk(2, -1);
    return norm_->forward(halves[0] * x1 + halves[1] * x2);
  }

 private:
  torch::nn::Linear gate_;
  torch::nn::LayerNorm norm_;
};
TORCH_MODULE(Gate);

class FdrDecoderLayerImpl : public torch::nn::Module {
 public:
  FdrDecoderLayerImpl(int dim, int heads, int feedforward, const std::vector<int>& points, Activation activation)
      : activation_(activation),
        self_attn_(register_module("self_attn", MultiheadAttention(dim, heads))),
        norm1_(register_module("norm1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})))),
        cross_attn_(register_module("cross_attn", FdrDeformableAttention(dim, heads, points))),
        gateway_(register_module("gateway", Gate(dim))),
        linear1_(register_module("linear1", torch::nn::Linear(dim, feedforward))),
        linear2_(register_module("linear2", torch::nn::Linear(feedforward, dim))),
        norm3_(register_module("norm3", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})))) {
    torch::NoGradGuard no_grad;
    torch::nn::init::xavier_uniform_(linear1_->weight);
    torch::nn::init::xavier_uniform_(linear2_->weight);
  }

  torch::Tensor forward(const torch::Tensor& target, const torch::Tensor& reference, const std::vector<torch::Tensor>& value,
                        const SpatialShapes& shapes, const torch::Tensor& attn_mask, const torch::Tensor& position) {
    const at::Tensor q = target + position;
    at::Tensor x = norm1_->forward(target + self_attn_->forward(q, q, target, attn_mask));
    const at::Tensor attended = cross_attn_->forward(x + position, reference, value, shapes);
    x = gateway_->forward(x, attended);
    x = x + linear(linear2_, activate(linear(linear1_, x), activation_));
    return norm3_->forward(x.clamp(-65504, 65504));  // the largest finite float16
  }

 private:
  Activation activation_;
  MultiheadAttention self_attn_;
  torch::nn::LayerNorm norm1_;
  FdrDeformableAttention cross_attn_;
  Gate gateway_;
  torch::nn::Linear linear1_, linear2_;
  torch::nn::LayerNorm norm3_;
};
TORCH_MODULE(FdrDecoderLayer);

// Localisation quality: the top-4 probabilities of each edge's distribution and their mean,
// through a small MLP ("reg_conf"), added to the class scores.
class LqeImpl : public torch::nn::Module {
 public:
  LqeImpl(int reg_max, Activation activation)
      : reg_max_(reg_max), reg_conf_(register_module("reg_conf", Mlp(4 * (kTop + 1), 64, 1, 2, activation))) {
    torch::NoGradGuard no_grad;
    reg_conf_->last()->weight.zero_();
    reg_conf_->last()->bias.zero_();
  }
  torch::Tensor forward(const torch::Tensor& scores, const torch::Tensor& corners) {
    const int64_t batch = corners.size(0), queries = corners.size(1);
    const at::Tensor probability = at::softmax(corners.reshape({batch, queries, 4, reg_max_ + 1}), -1);
    const at::Tensor top = std::get<0>(probability.topk(kTop, -1));
    const at::Tensor statistics = at::cat({top, top.mean(-1, true)}, -1);
    return scores + reg_conf_->forward(statistics.reshape({batch, queries, -1}));
  }

 private:
  static constexpr int kTop = 4;
  int64_t reg_max_;
  Mlp reg_conf_;
};
TORCH_MODULE(Lqe);

// The reference's inner decoder ("decoder.decoder"): the layers, the quality heads, and its own
// references to up and reg_scale (the same tensors, under two names in the state dict).
class FdrStackImpl : public torch::nn::Module {
 public:
  FdrStackImpl(torch::nn::ModuleList layers, torch::nn::ModuleList lqe_layers, const at::Tensor& up, const at::Tensor& reg_scale) {
    register_module("layers", std::move(layers));
    register_module("lqe_layers", std::move(lqe_layers));
    register_buffer("up", up);
    register_buffer("reg_scale", reg_scale);
  }
};
TORCH_MODULE(FdrStack);

// A map's projection to the decoder's width: none where the widths agree (the reference's
// Identity), else a 1x1 conv and BatchNorm ("conv", "norm").
class ProjectionImpl : public torch::nn::Module {
 public:
  ProjectionImpl(int in, int out) {
    if (in == out) return;
    conv_ = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 1).bias(false)));
    norm_ = register_module("norm", nn::SyncableBatchNorm2d(out));
    torch::NoGradGuard no_grad;
    torch::nn::init::xavier_uniform_(conv_->weight);
  }
  torch::Tensor forward(const torch::Tensor& x) { return conv_ ? norm_->forward(conv_->forward(x)) : x; }

 private:
  torch::nn::Conv2d conv_{nullptr};
  nn::SyncableBatchNorm2d norm_{nullptr};
};
TORCH_MODULE(Projection);

}  // namespace

at::Tensor fdr_weighting(std::int64_t reg_max, const at::Tensor& up, const at::Tensor& reg_scale) {
  const at::Tensor bound1 = up[0].abs() * reg_scale.abs();
  const at::Tensor bound2 = up[0].abs() * reg_scale.abs() * 2;
  const at::Tensor step = at::pow(bound1 + 1, 2.0 / static_cast<double>(reg_max - 2));
  std::vector<at::Tensor> values{-bound2};
  for (std::int64_t i = reg_max / 2 - 1; i > 0; --i) values.push_back(-at::pow(step, i) + 1);
  values.push_back(at::zeros_like(up[0].unsqueeze(0)));
  for (std::int64_t i = 1; i < reg_max / 2; ++i) values.push_back(at::pow(step, i) - 1);
  values.push_back(bound2);
  return at::cat(values, 0);
}

at::Tensor fdr_distance_to_box(const at::Tensor& points, const at::Tensor& distance, const at::Tensor& reg_scale_in) {
  const at::Tensor reg_scale = reg_scale_in.abs();
  const auto p = [&](int64_t i) { return points.select(-1, i); };
  const auto d = [&](int64_t i) { return distance.select(-1, i); };
  const at::Tensor x1 = p(0) - (0.5 * reg_scale + d(0)) * (p(2) / reg_scale);
  const at::Tensor y1 = p(1) - (0.5 * reg_scale + d(1)) * (p(3) / reg_scale);
  const at::Tensor x2 = p(0) + (0.5 * reg_scale + d(2)) * (p(2) / reg_scale);
  const at::Tensor y2 = p(1) + (0.5 * reg_scale + d(3)) * (p(3) / reg_scale);
  return corners_to_centre_size(at::stack({x1, y1, x2, y2}, -1));
}

DfineDecoderImpl::DfineDecoderImpl(const DfineDecoderOptions& options) : options_(options) {
  const int hidden = options.hidden;
  const auto levels = options.in_channels.size();
  if (options.points.size() != levels || options.strides.size() != levels) {
    throw ModelError(fmt::format("D-FINE decoder: {} maps with {} point counts and {} strides", levels, options.points.size(),
                                 options.strides.size()));
  }
  input_proj_ = register_module("input_proj", torch::nn::ModuleList());
  for (const int channels : options.in_channels) input_proj_->push_back(Projection(channels, hidden));
  up_ = at::tensor({0.5F});
  reg_scale_ = at::tensor({static_cast<float>(options.reg_scale)});
  layers_ = torch::nn::ModuleList();
  lqe_layers_ = torch::nn::ModuleList();
  for (int i = 0; i < options.layers; ++i) {
    layers_->push_back(FdrDecoderLayer(hidden, options.heads, options.feedforward, options.points, options.activation));
    lqe_layers_->push_back(Lqe(options.reg_max, options.activation));
  }
  register_module("decoder", FdrStack(layers_, lqe_layers_, up_, reg_scale_));
  up_ = register_buffer("up", up_);  // the reference's frozen parameters: constants
  reg_scale_ = register_buffer("reg_scale", reg_scale_);
  denoising_class_embed_ = register_module(
      "denoising_class_embed", torch::nn::Embedding(torch::nn::EmbeddingOptions(options.classes + 1, hidden).padding_idx(options.classes)));
  const Activation mlp = options.mlp_activation;
  query_pos_head_ = register_module("query_pos_head", Mlp(4, 2 * hidden, hidden, 2, mlp));
  enc_output_linear_ = torch::nn::Linear(hidden, hidden);
  enc_output_norm_ = torch::nn::LayerNorm(torch::nn::LayerNormOptions({hidden}));
  enc_output_ = register_module("enc_output", torch::nn::Sequential({{"proj", enc_output_linear_}, {"norm", enc_output_norm_}}));
  enc_score_head_ = register_module("enc_score_head", torch::nn::Linear(hidden, options.classes));
  enc_bbox_head_ = register_module("enc_bbox_head", Mlp(hidden, hidden, 4, 3, mlp));
  dec_score_head_ = register_module("dec_score_head", torch::nn::ModuleList());
  pre_bbox_head_ = register_module("pre_bbox_head", Mlp(hidden, hidden, 4, 3, mlp));
  dec_bbox_head_ = register_module("dec_bbox_head", torch::nn::ModuleList());
  for (int i = 0; i < options.layers; ++i) {
    dec_score_head_->push_back(torch::nn::Linear(hidden, options.classes));
    dec_bbox_head_->push_back(Mlp(hidden, hidden, 4 * (options.reg_max + 1), 3, mlp));
  }
  // the grid anchors of the eval size, which the reference's weights hold
  SpatialShapes eval_shapes;
  for (const int stride : options.strides) eval_shapes.emplace_back(options.eval_size / stride, options.eval_size / stride);
  auto [anchors, valid] = grid_anchors(eval_shapes, torch::kCPU, 1e4);
  register_buffer("anchors", anchors);
  register_buffer("valid_mask", valid);
  reset_parameters();
}

void DfineDecoderImpl::reset_parameters() {
  torch::NoGradGuard no_grad;
  const double bias = -std::log((1 - 0.01) / 0.01);  // a prior of 0.01 per class
  enc_score_head_->bias.fill_(bias);
  for (auto* head : {enc_bbox_head_.get(), pre_bbox_head_.get()}) {
    head->last()->weight.zero_();
    head->last()->bias.zero_();
  }
  for (int i = 0; i < options_.layers; ++i) {
    dec_score_head_[i]->as<torch::nn::LinearImpl>()->bias.fill_(bias);
    auto* head = dec_bbox_head_[i]->as<MlpImpl>();
    head->last()->weight.zero_();
    head->last()->bias.zero_();
  }
  torch::nn::init::xavier_uniform_(enc_output_linear_->weight);
  torch::nn::init::xavier_uniform_(query_pos_head_->layer(0)->weight);
  torch::nn::init::xavier_uniform_(query_pos_head_->layer(1)->weight);
}

DfineOutputs DfineDecoderImpl::forward(const std::vector<torch::Tensor>& features, const DenoisingQueries* denoising) {
  // memory: every level flattened, [B, V, hidden]
  std::vector<at::Tensor> flat;
  SpatialShapes shapes;
  for (std::size_t i = 0; i < features.size(); ++i) {
    const at::Tensor projected = input_proj_[i]->as<ProjectionImpl>()->forward(features[i]);
    shapes.emplace_back(projected.size(2), projected.size(3));
    flat.push_back(projected.flatten(2).permute({0, 2, 1}));
  }
  const at::Tensor memory = at::cat(flat, 1);
  const int64_t batch = memory.size(0);
  const bool training = is_training();
  const bool with_denoising = training && denoising != nullptr && denoising->count > 0;
  if (memory.size(1) < options_.queries) {
    throw UsageError(fmt::format("D-FINE and DEIM select {} queries from the encoder's positions, but a {}x{} input gives only "
                                 "{}: use a larger imgsz (multi_scale draws batches down to 0.75 x imgsz; multi_scale=false keeps "
                                 "imgsz)",
                                 options_.queries, features.at(0).size(3) * options_.strides.at(0),
                                 features.at(0).size(2) * options_.strides.at(0), memory.size(1)));
  }

  // query selection: the top-k positions by their best class score
  auto [anchors, valid] = grid_anchors(shapes, memory.device(), 1e4);
  anchors = anchors.to(memory.scalar_type());
  if (batch > 1) anchors = anchors.repeat({batch, 1, 1});
  const at::Tensor output_memory = enc_output_norm_->forward(linear(enc_output_linear_, valid.to(memory.scalar_type()) * memory));
  const at::Tensor enc_class = linear(enc_score_head_, output_memory);
  const at::Tensor top = std::get<1>(at::topk(std::get<0>(enc_class.max(-1)), options_.queries, -1)).unsqueeze(-1);
  const at::Tensor top_anchors = anchors.gather(1, top.repeat({1, 1, anchors.size(-1)}));
  const at::Tensor top_logits = training ? enc_class.gather(1, top.repeat({1, 1, enc_class.size(-1)})) : at::Tensor();
  const at::Tensor top_memory = output_memory.gather(1, top.repeat({1, 1, output_memory.size(-1)}));
  at::Tensor reference = enc_bbox_head_->forward(top_memory) + top_anchors;
  DfineOutputs out;
  if (training) out.encoder = {top_logits, at::sigmoid(reference)};
  at::Tensor target = top_memory.detach();
  reference = reference.detach();
  if (with_denoising) {
    reference = at::cat({denoising->boxes_unact.to(reference.scalar_type()), reference}, 1);
    target = at::cat({denoising_class_embed_->forward(denoising->classes), target}, 1);
  }
  const at::Tensor attn_mask = with_denoising ? denoising->attn_mask : at::Tensor();

  // the layers: value per level [B, heads, head_dim, H * W]
  std::vector<int64_t> sizes;
  for (const auto& [h, w] : shapes) sizes.push_back(h * w);
  const std::vector<at::Tensor> value =
      memory.reshape({batch, memory.size(1), options_.heads, -1}).permute({0, 2, 3, 1}).split_with_sizes(sizes, -1);
  const at::Tensor project = fdr_weighting(options_.reg_max, up_, reg_scale_);
  at::Tensor output = target, output_detached, corners_before;
  at::Tensor points_detached = at::sigmoid(reference);
  at::Tensor pre_boxes, pre_scores, initial;
  std::vector<at::Tensor> all_boxes, all_logits, all_corners, all_references;
  for (int i = 0; i < options_.layers; ++i) {
    const at::Tensor position = query_pos_head_->forward(points_detached).clamp(-10, 10);
    output = layers_[i]->as<FdrDecoderLayerImpl>()->forward(output, points_detached.unsqueeze(2), value, shapes, attn_mask, position);
    if (i == 0) {
      pre_boxes = at::sigmoid(pre_bbox_head_->forward(output) + inverse_sigmoid(points_detached));
      pre_scores = linear(torch::nn::Linear(dec_score_head_->ptr<torch::nn::LinearImpl>(0)), output);
      initial = pre_boxes.detach();
    }
    auto* bbox_head = dec_bbox_head_[i]->as<MlpImpl>();
    // each layer refines the previous layer's distribution (its gradient flows back through it)
    at::Tensor corners = output_detached.defined() ? bbox_head->forward(output + output_detached) + corners_before
                                                   : bbox_head->forward(output);
    // the integral: each edge's expected offset under its distribution, sum_n P(n) W(n)
    const at::Tensor offsets = at::linear(at::softmax(corners.reshape({-1, options_.reg_max + 1}), 1), project.to(corners.device()))
                                   .reshape({-1, 4})
                                   .reshape({corners.size(0), corners.size(1), -1});
    const at::Tensor boxes = fdr_distance_to_box(initial, offsets, reg_scale_);
    const int last = options_.layers - 1;
    if (training || i == last) {
      const torch::nn::Linear score_head(dec_score_head_->ptr<torch::nn::LinearImpl>(static_cast<std::size_t>(i)));
      const at::Tensor scores = lqe_layers_[i]->as<LqeImpl>()->forward(linear(score_head, output), corners);
      all_logits.push_back(scores);
      all_boxes.push_back(boxes);
      all_corners.push_back(corners);
      all_references.push_back(initial);
      if (!training) break;
    }
    corners_before = corners;
    points_detached = boxes.detach();
    output_detached = output.detach();
  }

  // stacked, then split into the denoising and the matching queries, as the reference does
  const at::Tensor stacked_boxes = at::stack(all_boxes), stacked_logits = at::stack(all_logits);
  if (!training) {
    out.last = {stacked_logits.select(0, -1), stacked_boxes.select(0, -1), {}, {}};
    return out;
  }
  const at::Tensor stacked_corners = at::stack(all_corners), stacked_references = at::stack(all_references);
  const int64_t split = with_denoising ? denoising->count : 0;
  const std::vector<int64_t> parts{split, options_.queries};
  const auto halves = [&](const at::Tensor& t, int64_t dim) {
    return with_denoising ? t.split_with_sizes(parts, dim) : std::vector<at::Tensor>{at::Tensor(), t};
  };
  const auto pre_logits = halves(pre_scores, 1), pre_box = halves(pre_boxes, 1);
  const auto boxes = halves(stacked_boxes, 2), logits = halves(stacked_logits, 2), corners = halves(stacked_corners, 2),
             references = halves(stacked_references, 2);
  const auto levels = [](const at::Tensor& l, const at::Tensor& b, const at::Tensor& c, const at::Tensor& r) {
    std::vector<FdrLevel> out;
    const auto ls = l.unbind(0), bs = b.unbind(0), cs = c.unbind(0), rs = r.unbind(0);
    for (std::size_t i = 0; i < ls.size(); ++i) out.push_back({ls[i], bs[i], cs[i], rs[i]});
    return out;
  };
  const int64_t count = stacked_logits.size(0);
  out.last = {logits[1].select(0, -1), boxes[1].select(0, -1), corners[1].select(0, -1), references[1].select(0, -1)};
  out.auxiliary = levels(logits[1].narrow(0, 0, count - 1), boxes[1].narrow(0, 0, count - 1), corners[1].narrow(0, 0, count - 1),
                         references[1].narrow(0, 0, count - 1));
  out.pre = {pre_logits[1], pre_box[1]};
  out.up = up_;
  out.reg_scale = reg_scale_;
  if (with_denoising) {
    out.denoising = levels(logits[0], boxes[0], corners[0], references[0]);
    out.denoising_pre = {pre_logits[0], pre_box[0]};
    out.denoising_match = denoising->match;
  }
  return out;
}

}  // namespace libreyolo::models::detr
