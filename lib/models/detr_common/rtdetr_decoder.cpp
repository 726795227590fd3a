#include "models/detr_common/rtdetr_decoder.h"
#include "models/detr_common/sampling.h"

#include "core/error.h"
#include "nn/sync_norm.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/nn/functional/vision.h>
#include <torch/nn/init.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>

#include <cmath>
#include <limits>
#include <numbers>

namespace libreyolo::models::detr {

namespace {

namespace F = torch::nn::functional;

// The decoder layers under the reference's name ("decoder.layers").
class DecoderStackImpl : public torch::nn::Module {
 public:
  explicit DecoderStackImpl(torch::nn::ModuleList layers) : layers_(register_module("layers", std::move(layers))) {}

 private:
  torch::nn::ModuleList layers_;
};
TORCH_MODULE(DecoderStack);

// Bilinear samples of each level's values at the sampling locations, weighted and summed:
// [B, Q, heads * head_dim].
at::Tensor deformable_attention_core(const at::Tensor& value, const SpatialShapes& shapes, const at::Tensor& locations,
                                     const at::Tensor& weights) {
  const int64_t batch = value.size(0), heads = value.size(2), channels = value.size(3);
  const int64_t queries = locations.size(1), levels = locations.size(3), points = locations.size(4);
  std::vector<int64_t> sizes;
  for (const auto& [h, w] : shapes) sizes.push_back(h * w);
  const auto per_level = value.split_with_sizes(sizes, 1);
  const at::Tensor grids = 2 * locations - 1;
  std::vector<at::Tensor> sampled;
  for (std::size_t level = 0; level < shapes.size(); ++level) {
    const auto [h, w] = shapes[level];
    const at::Tensor values = per_level[level].flatten(2).permute({0, 2, 1}).reshape({batch * heads, channels, h, w});
    const at::Tensor grid = grids.select(3, static_cast<int64_t>(level)).permute({0, 2, 1, 3, 4}).flatten(0, 1);
    sampled.push_back(bilinear_sample(values, grid));
  }
  const at::Tensor w = weights.permute({0, 2, 1, 3, 4}).reshape({batch * heads, 1, queries, levels * points});
  return (at::stack(sampled, -2).flatten(-2) * w).sum(-1).reshape({batch, heads * channels, queries}).permute({0, 2, 1});
}

}  // namespace

MlpImpl::MlpImpl(int in, int hidden, int out, int layers, Activation activation)
    : list_(register_module("layers", torch::nn::ModuleList())), activation_(activation) {
  for (int i = 0; i < layers; ++i) {
    layers_.emplace_back(i == 0 ? in : hidden, i == layers - 1 ? out : hidden);
    list_->push_back(layers_.back());
  }
}

torch::Tensor MlpImpl::forward(torch::Tensor x) {
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    x = linear(layers_[i], x);
    if (i + 1 < layers_.size()) x = activate(x, activation_);
  }
  return x;
}

DeformableAttentionImpl::DeformableAttentionImpl(int dim, int heads, int levels, int points)
    : sampling_offsets_(register_module("sampling_offsets", torch::nn::Linear(dim, heads * levels * points * 2))),
      attention_weights_(register_module("attention_weights", torch::nn::Linear(dim, heads * levels * points))),
      value_proj_(register_module("value_proj", torch::nn::Linear(dim, dim))),
      output_proj_(register_module("output_proj", torch::nn::Linear(dim, dim))),
      heads_(heads),
      levels_(levels),
      points_(points) {
  torch::NoGradGuard no_grad;  // the reference's initialisation: offsets on a circle per head, growing per point
  sampling_offsets_->weight.zero_();
  const at::Tensor thetas = at::arange(heads, at::kFloat) * (2.0 * std::numbers::pi / heads);
  at::Tensor grid = at::stack({thetas.cos(), thetas.sin()}, -1);
  grid = grid / std::get<0>(grid.abs().max(-1, true));
  grid = grid.reshape({heads, 1, 1, 2}).repeat({1, levels, points, 1}) * at::arange(1, points + 1, at::kFloat).reshape({1, 1, -1, 1});
  sampling_offsets_->bias.copy_(grid.flatten());
  attention_weights_->weight.zero_();
  attention_weights_->bias.zero_();
  for (auto& linear : {value_proj_, output_proj_}) {
    torch::nn::init::xavier_uniform_(linear->weight);
    linear->bias.zero_();
  }
}

torch::Tensor DeformableAttentionImpl::forward(const torch::Tensor& query, const torch::Tensor& reference,
                                               const torch::Tensor& value_in, const SpatialShapes& shapes) {
  const int64_t batch = query.size(0), queries = query.size(1), values = value_in.size(1);
  const int64_t head_dim = value_in.size(2) / heads_;
  const at::Tensor value = linear(value_proj_, value_in).reshape({batch, values, heads_, head_dim});
  const at::Tensor offsets = linear(sampling_offsets_, query).reshape({batch, queries, heads_, levels_, points_, 2});
  at::Tensor weights = linear(attention_weights_, query).reshape({batch, queries, heads_, levels_ * points_});
  weights = at::softmax(weights, -1).reshape({batch, queries, heads_, levels_, points_});
  using at::indexing::None;
  using at::indexing::Slice;
  const at::Tensor centre = reference.index({Slice(), Slice(), None, Slice(), None, Slice(None, 2)});
  const at::Tensor size = reference.index({Slice(), Slice(), None, Slice(), None, Slice(2, None)});
  const at::Tensor locations = centre + offsets / points_ * size * 0.5;
  return linear(output_proj_, deformable_attention_core(value, shapes, locations, weights));
}

DecoderLayerImpl::DecoderLayerImpl(int dim, int heads, int feedforward, int levels, int points)
    : self_attn_(register_module("self_attn", MultiheadAttention(dim, heads))),
      cross_attn_(register_module("cross_attn", DeformableAttention(dim, heads, levels, points))),
      norm1_(register_module("norm1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})))),
      norm2_(register_module("norm2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})))),
      norm3_(register_module("norm3", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})))),
      linear1_(register_module("linear1", torch::nn::Linear(dim, feedforward))),
      linear2_(register_module("linear2", torch::nn::Linear(feedforward, dim))) {}

torch::Tensor DecoderLayerImpl::forward(const torch::Tensor& target, const torch::Tensor& reference, const torch::Tensor& memory,
                                        const SpatialShapes& shapes, const torch::Tensor& attn_mask, const torch::Tensor& position) {
  const at::Tensor q = target + position;
  at::Tensor x = norm1_->forward(target + self_attn_->forward(q, q, target, attn_mask));
  x = norm2_->forward(x + cross_attn_->forward(x + position, reference, memory, shapes));
  x = x + linear(linear2_, at::relu(linear(linear1_, x)));
  return norm3_->forward(x.clamp(-65504, 65504));
}

std::pair<torch::Tensor, torch::Tensor> grid_anchors(const SpatialShapes& shapes, const torch::Device& device, double invalid) {
  constexpr double kGridSize = 0.05, kEps = 1e-2;
  std::vector<at::Tensor> anchors;
  const auto options = at::TensorOptions().dtype(at::kFloat).device(device);
  for (std::size_t level = 0; level < shapes.size(); ++level) {
    const auto [h, w] = shapes[level];
    const auto grid = at::meshgrid({at::arange(h, options), at::arange(w, options)}, "ij");
    const at::Tensor xy = at::stack({grid[1], grid[0]}, -1).unsqueeze(0) + 0.5;
    const at::Tensor normalised = at::stack({xy.select(-1, 0) / static_cast<double>(w), xy.select(-1, 1) / static_cast<double>(h)}, -1);
    const at::Tensor wh = at::ones_like(normalised) * kGridSize * std::pow(2.0, static_cast<double>(level));
    anchors.push_back(at::cat({normalised, wh}, -1).reshape({-1, h * w, 4}));
  }
  at::Tensor all = at::cat(anchors, 1);
  const at::Tensor valid = ((all > kEps) * (all < 1 - kEps)).all(-1, true);
  all = at::log(all / (1 - all));
  return {at::where(valid, all, invalid), valid};
}

RtdetrDecoderImpl::RtdetrDecoderImpl(const RtdetrDecoderOptions& options) : options_(options) {
  const int hidden = options.hidden;
  input_proj_ = register_module("input_proj", torch::nn::ModuleList());
  for (int i = 0; i < options.levels; ++i) {
    torch::nn::Sequential projection;
    projection->push_back("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(options.in_channels, hidden, 1).bias(false)));
    projection->push_back("norm", nn::SyncableBatchNorm2d(hidden));
    input_proj_->push_back(projection);
  }
  layers_ = torch::nn::ModuleList();
  for (int i = 0; i < options.layers; ++i) {
    layers_->push_back(DecoderLayer(hidden, options.heads, options.feedforward, options.levels, options.points));
  }
  register_module("decoder", DecoderStack(layers_));
  denoising_class_embed_ = register_module(
      "denoising_class_embed", torch::nn::Embedding(torch::nn::EmbeddingOptions(options.classes + 1, hidden).padding_idx(options.classes)));
  query_pos_head_ = register_module("query_pos_head", Mlp(4, 2 * hidden, hidden, 2));
  enc_output_linear_ = torch::nn::Linear(hidden, hidden);
  enc_output_ = register_module("enc_output", torch::nn::Sequential(enc_output_linear_,
                                                                    torch::nn::LayerNorm(torch::nn::LayerNormOptions({hidden}))));
  enc_score_head_ = register_module("enc_score_head", torch::nn::Linear(hidden, options.classes));
  enc_bbox_head_ = register_module("enc_bbox_head", Mlp(hidden, hidden, 4, 3));
  dec_score_head_ = register_module("dec_score_head", torch::nn::ModuleList());
  dec_bbox_head_ = register_module("dec_bbox_head", torch::nn::ModuleList());
  for (int i = 0; i < options.layers; ++i) {
    dec_score_head_->push_back(torch::nn::Linear(hidden, options.classes));
    dec_bbox_head_->push_back(Mlp(hidden, hidden, 4, 3));
  }
  reset_parameters();
}

void RtdetrDecoderImpl::reset_parameters() {
  torch::NoGradGuard no_grad;
  const double bias = -std::log((1 - 0.01) / 0.01);  // a prior of 0.01 per class
  enc_score_head_->bias.fill_(bias);
  enc_bbox_head_->last()->weight.zero_();
  enc_bbox_head_->last()->bias.zero_();
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

DetrOutputs RtdetrDecoderImpl::forward(const std::vector<torch::Tensor>& features, const DenoisingQueries* denoising) {
  // memory: every level flattened, [B, V, hidden]
  std::vector<at::Tensor> flat;
  SpatialShapes shapes;
  for (std::size_t i = 0; i < features.size(); ++i) {
    const at::Tensor projected = input_proj_[i]->as<torch::nn::SequentialImpl>()->forward(features[i]);
    shapes.emplace_back(projected.size(2), projected.size(3));
    flat.push_back(projected.flatten(2).permute({0, 2, 1}));
  }
  const at::Tensor memory = at::cat(flat, 1);
  const bool with_denoising = is_training() && denoising != nullptr && denoising->count > 0;

  // query selection: the top-k positions by their best class score
  auto [anchors, valid] = grid_anchors(shapes, memory.device());
  anchors = anchors.to(memory.scalar_type());
  // positions on the border score nothing (their anchors are +inf); the layers still attend to them
  const at::Tensor scored = valid.to(memory.scalar_type()) * memory;
  const at::Tensor output_memory = enc_output_[1]->as<torch::nn::LayerNormImpl>()->forward(linear(enc_output_linear_, scored));
  const at::Tensor enc_class = linear(enc_score_head_, output_memory);
  const at::Tensor enc_coord = enc_bbox_head_->forward(output_memory) + anchors;
  if (memory.size(1) < options_.queries) {
    throw UsageError(fmt::format("RT-DETR selects {} queries from the encoder's positions, but a {}x{} input has only {}: "
                                 "use a larger imgsz (128 or more for 300 queries)",
                                 options_.queries, features.at(0).size(3) * 8, features.at(0).size(2) * 8, memory.size(1)));
  }
  const at::Tensor top = std::get<1>(at::topk(std::get<0>(enc_class.max(-1)), options_.queries, 1));
  at::Tensor reference = enc_coord.gather(1, top.unsqueeze(-1).repeat({1, 1, enc_coord.size(-1)}));
  const at::Tensor enc_boxes = reference.sigmoid();
  if (with_denoising) reference = at::cat({denoising->boxes_unact.to(reference.scalar_type()), reference}, 1);
  const at::Tensor enc_logits = enc_class.gather(1, top.unsqueeze(-1).repeat({1, 1, enc_class.size(-1)}));
  at::Tensor target = output_memory.gather(1, top.unsqueeze(-1).repeat({1, 1, output_memory.size(-1)})).detach();
  if (with_denoising) target = at::cat({denoising_class_embed_->forward(denoising->classes), target}, 1);
  reference = reference.detach();
  const at::Tensor attn_mask = with_denoising ? denoising->attn_mask : at::Tensor();

  // the layers, each refining the boxes it was given
  at::Tensor output = target;
  at::Tensor points_detached = reference.sigmoid().to(output.scalar_type());
  at::Tensor points = points_detached;
  std::vector<at::Tensor> logits, boxes;
  const int last_layer = options_.eval_layer >= 0 ? options_.eval_layer : options_.layers + options_.eval_layer;
  for (int i = 0; i < options_.layers; ++i) {
    const at::Tensor position = query_pos_head_->forward(points_detached);
    output = layers_[i]->as<DecoderLayerImpl>()->forward(output, points_detached.unsqueeze(2), memory, shapes, attn_mask, position);
    auto* bbox_head = dec_bbox_head_[i]->as<MlpImpl>();
    const torch::nn::Linear score_head(dec_score_head_->ptr<torch::nn::LinearImpl>(i));
    const at::Tensor refined = (bbox_head->forward(output) + inverse_sigmoid(points_detached)).sigmoid();
    if (is_training()) {
      logits.push_back(linear(score_head, output));
      // the same values as `refined`, with the gradient through the previous layer's boxes
      boxes.push_back(i == 0 ? refined : (bbox_head->forward(output) + inverse_sigmoid(points)).sigmoid());
    } else if (i == last_layer) {
      logits.push_back(linear(score_head, output));
      boxes.push_back(refined);
      break;
    }
    points = refined;
    points_detached = is_training() ? refined.detach() : refined;
  }

  DetrOutputs out;
  const int64_t split = with_denoising ? denoising->count : 0;
  const auto matching = [&](const at::Tensor& t) { return split ? t.narrow(1, split, t.size(1) - split) : t; };
  out.last = {matching(logits.back()), matching(boxes.back())};
  if (!is_training()) return out;
  for (std::size_t i = 0; i + 1 < logits.size(); ++i) out.auxiliary.push_back({matching(logits[i]), matching(boxes[i])});
  out.auxiliary.push_back({enc_logits, enc_boxes});
  if (with_denoising) {
    for (std::size_t i = 0; i < logits.size(); ++i) out.denoising.push_back({logits[i].narrow(1, 0, split), boxes[i].narrow(1, 0, split)});
    out.denoising_match = denoising->match;
  }
  return out;
}

}  // namespace libreyolo::models::detr
