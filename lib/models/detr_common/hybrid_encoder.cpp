#include "models/detr_common/hybrid_encoder.h"

#include "core/error.h"
#include "nn/sync_norm.h"

#include <ATen/ATen.h>
#include <torch/nn/functional/upsampling.h>
#include <torch/nn/init.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>

#include <cmath>

namespace libreyolo::models::detr {

namespace {

// RepVGG block as trained: silu(3x3 ConvNorm + 1x1 ConvNorm) (names conv1, conv2).
class RepVggBlockImpl : public torch::nn::Module {
 public:
  explicit RepVggBlockImpl(int channels)
      : conv1_(register_module("conv1", ConvNorm(channels, channels, 3, 1, Activation::none))),
        conv2_(register_module("conv2", ConvNorm(channels, channels, 1, 1, Activation::none))) {}
  torch::Tensor forward(const torch::Tensor& x) {
    // in the reference's order (C++ leaves the operands of + unordered): a tensor with three users
    // sums its gradients in the order they were created
    const torch::Tensor wide = conv1_->forward(x);
    return at::silu(wide + conv2_->forward(x));
  }

 private:
  ConvNorm conv1_, conv2_;
};
TORCH_MODULE(RepVggBlock);

// CSP block: conv3(bottlenecks(conv1(x)) + conv2(x)), conv3 only where the hidden width differs.
class CspRepLayerImpl : public torch::nn::Module {
 public:
  CspRepLayerImpl(int in_channels, int out_channels, int blocks, double expansion) {
    const int hidden = static_cast<int>(out_channels * expansion);
    conv1_ = register_module("conv1", ConvNorm(in_channels, hidden, 1, 1, Activation::silu));
    conv2_ = register_module("conv2", ConvNorm(in_channels, hidden, 1, 1, Activation::silu));
    bottlenecks_ = register_module("bottlenecks", torch::nn::Sequential());
    for (int i = 0; i < blocks; ++i) bottlenecks_->push_back(RepVggBlock(hidden));
    if (hidden != out_channels) conv3_ = register_module("conv3", ConvNorm(hidden, out_channels, 1, 1, Activation::silu));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    const torch::Tensor blocks = bottlenecks_->forward(conv1_->forward(x));  // before conv2, as the reference
    const torch::Tensor y = blocks + conv2_->forward(x);
    return conv3_ ? conv3_->forward(y) : y;
  }

 private:
  ConvNorm conv1_{nullptr}, conv2_{nullptr}, conv3_{nullptr};
  torch::nn::Sequential bottlenecks_{nullptr};
};
TORCH_MODULE(CspRepLayer);

// SCDown: a 1x1 ConvNorm, then a depthwise strided kxk one, both without activation (cv1, cv2).
class ScDownImpl : public torch::nn::Module {
 public:
  ScDownImpl(int in_channels, int out_channels, int kernel, int stride)
      : cv1_(register_module("cv1", ConvNorm(in_channels, out_channels, 1, 1, Activation::none))),
        cv2_(register_module("cv2", ConvNorm(out_channels, out_channels, kernel, stride, Activation::none, false, out_channels))) {}
  torch::Tensor forward(const torch::Tensor& x) { return cv2_->forward(cv1_->forward(x)); }

 private:
  ConvNorm cv1_, cv2_;
};
TORCH_MODULE(ScDown);

// RepNCSPELAN4(c1, c2, c3, c4, n): cv1 (1x1 to c3) split in halves; cv2 and cv3 (a CSP block of n
// RepVGG blocks, then a 3x3 ConvNorm) each on the last piece; cv4 aggregates the four (1x1 to c2).
class RepNcspElan4Impl : public torch::nn::Module {
 public:
  RepNcspElan4Impl(int c1, int c2, int c3, int c4, int n) : half_(c3 / 2) {
    cv1_ = register_module("cv1", ConvNorm(c1, c3, 1, 1, Activation::silu));
    cv2_ = register_module("cv2", torch::nn::Sequential(CspRepLayer(c3 / 2, c4, n, 1.0), ConvNorm(c4, c4, 3, 1, Activation::silu)));
    cv3_ = register_module("cv3", torch::nn::Sequential(CspRepLayer(c4, c4, n, 1.0), ConvNorm(c4, c4, 3, 1, Activation::silu)));
    cv4_ = register_module("cv4", ConvNorm(c3 + 2 * c4, c2, 1, 1, Activation::silu));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    std::vector<torch::Tensor> pieces = cv1_->forward(x).split_with_sizes({half_, half_}, 1);
    pieces.push_back(cv2_->forward(pieces.back()));
    pieces.push_back(cv3_->forward(pieces.back()));
    return cv4_->forward(at::cat(pieces, 1));
  }

 private:
  std::int64_t half_;
  ConvNorm cv1_{nullptr}, cv4_{nullptr};
  torch::nn::Sequential cv2_{nullptr}, cv3_{nullptr};
};
TORCH_MODULE(RepNcspElan4);

// A stack of encoder layers ("layers").
class TransformerEncoderImpl : public torch::nn::Module {
 public:
  TransformerEncoderImpl(int layers, int dim, int heads, int feedforward)
      : layers_(register_module("layers", torch::nn::ModuleList())) {
    for (int i = 0; i < layers; ++i) layers_->push_back(EncoderLayer(dim, heads, feedforward));
  }
  torch::Tensor forward(torch::Tensor x, const torch::Tensor& position) {
    for (const auto& layer : *layers_) x = layer->as<EncoderLayerImpl>()->forward(x, position);
    return x;
  }

 private:
  torch::nn::ModuleList layers_;
};
TORCH_MODULE(TransformerEncoder);

template <typename Module>
Module& nth(torch::nn::ModuleListImpl& list, std::size_t index) {
  return *list[index]->template as<Module>();
}

// A fusion block of either kind.
torch::Tensor fuse(torch::nn::ModuleListImpl& blocks, std::size_t index, const torch::Tensor& x) {
  if (auto* csp = blocks[index]->as<CspRepLayerImpl>()) return csp->forward(x);
  return blocks[index]->as<RepNcspElan4Impl>()->forward(x);
}

}  // namespace

torch::Tensor linear(const torch::nn::Linear& layer, const torch::Tensor& x) { return at::linear(x, layer->weight, layer->bias); }

MultiheadAttentionImpl::MultiheadAttentionImpl(int embed_dim, int heads)
    : in_proj_weight_(register_parameter("in_proj_weight", at::empty({3 * embed_dim, embed_dim}))),
      in_proj_bias_(register_parameter("in_proj_bias", at::zeros({3 * embed_dim}))),
      out_proj_(register_module("out_proj", torch::nn::Linear(embed_dim, embed_dim))),
      heads_(heads) {
  torch::NoGradGuard no_grad;  // PyTorch's initialisation
  torch::nn::init::xavier_uniform_(in_proj_weight_);
  out_proj_->bias.zero_();
}

torch::Tensor MultiheadAttentionImpl::forward(const torch::Tensor& query, const torch::Tensor& key, const torch::Tensor& value,
                                              const torch::Tensor& mask) {
  // sequence first, as torch.nn.functional.multi_head_attention_forward works
  const torch::Tensor q_in = query.transpose(1, 0), k_in = key.transpose(1, 0), v_in = value.transpose(1, 0);
  const int64_t target_length = q_in.size(0), batch = q_in.size(1), embed_dim = q_in.size(2);
  const int64_t head_dim = embed_dim / heads_;
  const auto weights = in_proj_weight_.chunk(3), biases = in_proj_bias_.chunk(3);
  torch::Tensor q = at::linear(q_in, weights[0], biases[0]);
  torch::Tensor k = at::linear(k_in, weights[1], biases[1]);
  torch::Tensor v = at::linear(v_in, weights[2], biases[2]);
  q = q.view({target_length, batch * heads_, head_dim}).transpose(0, 1);
  k = k.view({k.size(0), batch * heads_, head_dim}).transpose(0, 1);
  v = v.view({v.size(0), batch * heads_, head_dim}).transpose(0, 1);
  const torch::Tensor q_scaled = q * std::sqrt(1.0 / static_cast<double>(head_dim));
  torch::Tensor scores;
  if (mask.defined()) {
    torch::Tensor additive = mask;
    if (mask.scalar_type() == at::kBool) {
      additive = at::zeros(mask.sizes(), q.options()).masked_fill_(mask, -std::numeric_limits<double>::infinity());
    }
    scores = at::baddbmm(additive.unsqueeze(0), q_scaled, k.transpose(-2, -1));
  } else {
    scores = at::bmm(q_scaled, k.transpose(-2, -1));
  }
  torch::Tensor out = at::bmm(at::softmax(scores, -1), v);
  out = out.transpose(0, 1).contiguous().view({target_length * batch, embed_dim});
  out = at::linear(out, out_proj_->weight, out_proj_->bias).view({target_length, batch, embed_dim});
  return out.transpose(1, 0);
}

EncoderLayerImpl::EncoderLayerImpl(int dim, int heads, int feedforward)
    : self_attn_(register_module("self_attn", MultiheadAttention(dim, heads))),
      linear1_(register_module("linear1", torch::nn::Linear(dim, feedforward))),
      linear2_(register_module("linear2", torch::nn::Linear(feedforward, dim))),
      norm1_(register_module("norm1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})))),
      norm2_(register_module("norm2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})))) {}

torch::Tensor EncoderLayerImpl::forward(const torch::Tensor& source, const torch::Tensor& position) {
  const torch::Tensor q = source + position.to(source.device(), source.scalar_type());
  torch::Tensor x = norm1_->forward(source + self_attn_->forward(q, q, source));
  return norm2_->forward(x + linear(linear2_, at::gelu(linear(linear1_, x))));
}

torch::Tensor sincos_position_embedding(int w, int h, int dim, double temperature) {
  const auto grids = at::meshgrid({at::arange(w, at::kFloat), at::arange(h, at::kFloat)}, "ij");
  const int quarter = dim / 4;
  const torch::Tensor omega = 1.0 / at::pow(temperature, at::arange(quarter, at::kFloat) / quarter);
  const torch::Tensor out_w = at::matmul(grids[0].flatten().unsqueeze(-1), omega.unsqueeze(0));
  const torch::Tensor out_h = at::matmul(grids[1].flatten().unsqueeze(-1), omega.unsqueeze(0));
  return at::cat({out_w.sin(), out_w.cos(), out_h.sin(), out_h.cos()}, 1).unsqueeze(0);
}

HybridEncoderImpl::HybridEncoderImpl(const HybridEncoderOptions& options) : options_(options) {
  const int hidden = options.hidden;
  const bool elan = options.blocks == FusionBlocks::elan;
  if (options.in_channels.size() < 2) throw ModelError("the hybrid encoder fuses two or more backbone maps");
  input_proj_ = register_module("input_proj", torch::nn::ModuleList());
  for (const int channels : options.in_channels) {
    torch::nn::Conv2d conv(torch::nn::Conv2dOptions(channels, hidden, 1).bias(false));
    nn::SyncableBatchNorm2d norm(hidden);
    // RT-DETR's projection names its conv and norm 0 and 1, D-FINE's conv and norm
    input_proj_->push_back(elan ? torch::nn::Sequential({{"conv", conv}, {"norm", norm}}) : torch::nn::Sequential(conv, norm));
  }
  encoder_ = register_module("encoder", torch::nn::ModuleList());
  encoder_->push_back(TransformerEncoder(1, hidden, options.heads, options.feedforward));  // on the coarsest map
  lateral_convs_ = register_module("lateral_convs", torch::nn::ModuleList());
  fpn_blocks_ = register_module("fpn_blocks", torch::nn::ModuleList());
  downsample_convs_ = register_module("downsample_convs", torch::nn::ModuleList());
  pan_blocks_ = register_module("pan_blocks", torch::nn::ModuleList());
  // D-FINE's widths, as Python computes them: round((expansion * hidden) // 2) and round(3 * depth_mult)
  const int elan_width = static_cast<int>(std::nearbyint(std::floor(options.expansion * hidden / 2)));
  const int elan_depth = static_cast<int>(std::nearbyint(3 * options.depth_mult));
  for (std::size_t i = 0; i + 1 < options.in_channels.size(); ++i) {
    if (elan) {
      lateral_convs_->push_back(ConvNorm(hidden, hidden, 1, 1, Activation::none));
      fpn_blocks_->push_back(RepNcspElan4(2 * hidden, hidden, 2 * hidden, elan_width, elan_depth));
      downsample_convs_->push_back(torch::nn::Sequential(ScDown(hidden, hidden, 3, 2)));
      pan_blocks_->push_back(RepNcspElan4(2 * hidden, hidden, 2 * hidden, elan_width, elan_depth));
    } else {
      lateral_convs_->push_back(ConvNorm(hidden, hidden, 1, 1, Activation::silu));
      fpn_blocks_->push_back(CspRepLayer(2 * hidden, hidden, 3, options.expansion));
      downsample_convs_->push_back(ConvNorm(hidden, hidden, 3, 2, Activation::silu));
      pan_blocks_->push_back(CspRepLayer(2 * hidden, hidden, 3, options.expansion));
    }
  }
}

torch::Tensor HybridEncoderImpl::position_embedding(std::int64_t w, std::int64_t h, const torch::Device& device) {
  for (const Position& p : positions_) {
    if (p.w == w && p.h == h && p.value.device() == device) return p.value;
  }
  torch::Tensor value = sincos_position_embedding(static_cast<int>(w), static_cast<int>(h), options_.hidden).to(device);
  if (positions_.size() >= 16) positions_.erase(positions_.begin());  // multi_scale's sizes, and then some
  positions_.push_back({w, h, value});
  return value;
}

std::vector<torch::Tensor> HybridEncoderImpl::forward(const std::vector<torch::Tensor>& features) {
  const std::size_t levels = features.size();
  std::vector<torch::Tensor> projected;
  for (std::size_t i = 0; i < levels; ++i) projected.push_back(input_proj_[i]->as<torch::nn::SequentialImpl>()->forward(features[i]));
  {  // AIFI on the last map
    torch::Tensor& map = projected.back();
    const int64_t h = map.size(2), w = map.size(3);
    const torch::Tensor flat = map.flatten(2).permute({0, 2, 1});
    const torch::Tensor position = position_embedding(w, h, flat.device());
    map = nth<TransformerEncoderImpl>(*encoder_, 0).forward(flat, position).permute({0, 2, 1}).reshape({-1, options_.hidden, h, w}).contiguous();
  }
  namespace F = torch::nn::functional;
  std::vector<torch::Tensor> inner{projected.back()};  // top-down, inner.front() the finest so far
  for (std::size_t level = levels - 1; level > 0; --level) {
    const std::size_t k = levels - 1 - level;
    const torch::Tensor high = nth<ConvNormImpl>(*lateral_convs_, k).forward(inner.front());
    inner.front() = high;
    const torch::Tensor upsampled = F::interpolate(high, F::InterpolateFuncOptions().scale_factor(std::vector<double>{2.0, 2.0}).mode(torch::kNearest));
    inner.insert(inner.begin(), fuse(*fpn_blocks_, k, at::cat({upsampled, projected[level - 1]}, 1)));
  }
  std::vector<torch::Tensor> outputs{inner.front()};  // bottom-up
  for (std::size_t k = 0; k + 1 < levels; ++k) {
    auto* strided = downsample_convs_[k]->as<ConvNormImpl>();
    const torch::Tensor down = strided ? strided->forward(outputs.back())
                                       : downsample_convs_[k]->as<torch::nn::SequentialImpl>()->forward(outputs.back());
    outputs.push_back(fuse(*pan_blocks_, k, at::cat({down, inner[k + 1]}, 1)));
  }
  return outputs;
}

}  // namespace libreyolo::models::detr
