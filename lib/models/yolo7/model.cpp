#include "models/yolo7/model.h"

#include <ATen/ATen.h>
#include <torch/nn/modules/linear.h>

#include <cmath>

namespace libreyolo::models::yolo7 {

at::Tensor grid_anchors(const at::TensorOptions& options) {
  at::Tensor anchors = at::empty({3, kAnchorsPerLevel, 2});
  for (int level = 0; level < 3; ++level) {
    for (int k = 0; k < 2 * kAnchorsPerLevel; ++k) {
      anchors[level][k / 2][k % 2] = kAnchors[level][k] / static_cast<float>(kStrides[level]);
    }
  }
  return anchors.to(options);
}

SppcspImpl::SppcspImpl(int in_channels, int out_channels) {
  const int neck = out_channels;  // int(2 x out x 0.5)
  pre_conv_ = register_module("pre_conv", torch::nn::Sequential(nn::BaseConv(in_channels, neck, 1, 1), nn::BaseConv(neck, neck, 3, 1),
                                                                nn::BaseConv(neck, neck, 1, 1)));
  short_conv_ = register_module("short_conv", nn::BaseConv(in_channels, neck, 1, 1));
  post_conv_ = register_module("post_conv", torch::nn::Sequential(nn::BaseConv(4 * neck, neck, 1, 1), nn::BaseConv(neck, neck, 3, 1)));
  merge_conv_ = register_module("merge_conv", nn::BaseConv(2 * neck, out_channels, 1, 1));
}

torch::Tensor SppcspImpl::forward(const torch::Tensor& x) {
  const torch::Tensor f0 = pre_conv_->forward(x);
  const torch::Tensor f1 = at::max_pool2d(f0, {5, 5}, {1, 1}, {2, 2});
  const torch::Tensor f2 = at::max_pool2d(f1, {9, 9}, {1, 1}, {4, 4});
  const torch::Tensor f3 = at::max_pool2d(f2, {13, 13}, {1, 1}, {6, 6});
  return merge_conv_(torch::cat({post_conv_->forward(torch::cat({f0, f1, f2, f3}, 1)), short_conv_(x)}, 1));
}

RepConvImpl::RepConvImpl(int in_channels, int out_channels) {
  conv1_ = register_module("conv1", nn::BaseConv(in_channels, out_channels, 3, 1, 1, /*activation=*/false));
  conv2_ = register_module("conv2", nn::BaseConv(in_channels, out_channels, 1, 1, 1, /*activation=*/false));
}

torch::Tensor RepConvImpl::forward(const torch::Tensor& x) { return at::silu(conv1_(x) + conv2_(x)); }

ImplicitImpl::ImplicitImpl(int channels, double initial) {
  implicit = register_parameter("implicit", at::full({1, channels, 1, 1}, initial));
}

IDetectImpl::IDetectImpl(int in_channels, int class_count) : class_count_(class_count) {
  const int outputs = kAnchorsPerLevel * (5 + class_count);
  implicit_a_ = register_module("implicit_a", Implicit(in_channels, 0.0));
  head_conv_ = register_module("head_conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(in_channels, outputs, 1)));
  implicit_m_ = register_module("implicit_m", Implicit(outputs, 1.0));
}

torch::Tensor IDetectImpl::forward(const torch::Tensor& x) {
  return implicit_m_->implicit * head_conv_(x + implicit_a_->implicit);
}

void IDetectImpl::initialize_biases(double prior) {
  torch::NoGradGuard no_grad;
  head_conv_->bias.view({kAnchorsPerLevel, 5 + class_count_}).slice(1, 4).fill_(-std::log((1 - prior) / prior));
}

namespace {

// The head's container: layers.105.heads.{0,1,2}.
class HeadsImpl : public torch::nn::Module {
 public:
  explicit HeadsImpl(torch::nn::ModuleList heads) { register_module("heads", std::move(heads)); }
};
TORCH_MODULE(Heads);

}  // namespace

ModelImpl::ModelImpl(int class_count) : class_count_(class_count) {
  layers_ = register_module("layers", torch::nn::ModuleList());
  std::vector<int> channels;  // each module's output channels
  const auto in_channels = [&](int from) { return from < 0 ? 3 : channels[static_cast<std::size_t>(from)]; };
  const auto last = [&] { return static_cast<int>(plan_.size()) - 1; };
  const auto conv = [&](int out, int kernel, int stride, int from) {
    layers_->push_back(nn::BaseConv(in_channels(from), out, kernel, stride));
    plan_.push_back({Layer::conv, {from}});
    channels.push_back(out);
    return last();
  };
  const auto weightless = [&](Layer::Kind kind, std::vector<int> from, int out) {
    layers_->push_back(torch::nn::Identity());
    plan_.push_back({kind, std::move(from)});
    channels.push_back(out);
    return last();
  };
  const auto concat = [&](std::vector<int> from) {
    int out = 0;
    for (const int f : from) out += channels[static_cast<std::size_t>(f)];
    return weightless(Layer::concat, std::move(from), out);
  };
  // ELAN: two 1x1 branches from `from`, a chain of four 3x3 from the second; the concat of the
  // chain's 2nd and 4th with both branches (`wide`: all four chain outputs, the head's ELAN-H), then 1x1.
  const auto elan = [&](int from, int branch, int chain, int out, bool wide) {
    const int a = conv(branch, 1, 1, from), b = conv(branch, 1, 1, from);
    int c1 = conv(chain, 3, 1, b), c2 = conv(chain, 3, 1, c1), c3 = conv(chain, 3, 1, c2), c4 = conv(chain, 3, 1, c3);
    const int joined = wide ? concat({c4, c3, c2, c1, b, a}) : concat({c4, c2, b, a});
    return std::pair{joined, conv(out, 1, 1, joined)};
  };
  // MP: a 2x2 max pool then 1x1, beside 1x1 then a 3x3 stride-2 conv; concatenated (with `extra`).
  const auto mp = [&](int from, int width, int extra) {
    const int pool = weightless(Layer::pool, {from}, channels[static_cast<std::size_t>(from)]);
    const int pooled = conv(width, 1, 1, pool);
    const int strided = conv(width, 3, 2, conv(width, 1, 1, from));
    return extra < 0 ? concat({strided, pooled}) : concat({strided, pooled, extra});
  };

  conv(32, 3, 1, -1);                                        // 0
  conv(64, 3, 2, 0);                                         // 1
  conv(64, 3, 1, 1);                                         // 2
  int x = conv(128, 3, 2, 2);                                // 3
  x = elan(x, 64, 64, 256, false).second;                    // 4-11
  x = mp(x, 128, -1);                                        // 12-16
  const auto [b3, b3_out] = elan(x, 128, 128, 512, false);   // 17-24 (B3 = the concat, 23)
  x = mp(b3_out, 256, -1);                                   // 25-29
  const int b4 = elan(x, 256, 256, 1024, false).second;      // 30-37
  x = mp(b4, 512, -1);                                       // 38-42
  x = elan(x, 256, 256, 1024, false).second;                 // 43-50
  layers_->push_back(Sppcsp(channels.back(), 512));          // 51 (N3)
  plan_.push_back({Layer::sppcsp, {x}});
  channels.push_back(512);
  const int n3 = last();
  x = weightless(Layer::upsample, {conv(256, 1, 1, n3)}, 256);  // 52-53
  x = concat({conv(256, 1, 1, b4), x});                         // 54-55
  const int n2 = elan(x, 256, 128, 256, true).second;           // 56-63
  x = weightless(Layer::upsample, {conv(128, 1, 1, n2)}, 128);  // 64-65
  x = concat({conv(128, 1, 1, b3), x});                         // 66-67
  const int p3 = elan(x, 128, 64, 128, true).second;            // 68-75
  x = mp(p3, 128, n2);                                          // 76-80
  const int p4 = elan(x, 256, 128, 256, true).second;           // 81-88
  x = mp(p4, 256, n3);                                          // 89-93
  const int p5 = elan(x, 512, 256, 512, true).second;           // 94-101
  std::vector<int> rep;
  for (const auto& [from, out] : {std::pair{p3, 256}, std::pair{p4, 512}, std::pair{p5, 1024}}) {  // 102-104
    layers_->push_back(RepConv(channels[static_cast<std::size_t>(from)], out));
    plan_.push_back({Layer::repconv, {from}});
    channels.push_back(out);
    rep.push_back(last());
  }
  heads_ = torch::nn::ModuleList();
  for (const int r : rep) heads_->push_back(IDetect(channels[static_cast<std::size_t>(r)], class_count));
  layers_->push_back(Heads(heads_));                         // 105
  plan_.push_back({Layer::detect, rep});
  initialize_biases();  // what LibreYOLO's train() does before a run from scratch
}

void ModelImpl::initialize_biases(double prior) {
  for (std::size_t level = 0; level < heads_->size(); ++level) heads_[level]->as<IDetect>()->initialize_biases(prior);
}

std::vector<torch::Tensor> ModelImpl::forward(const torch::Tensor& images) {
  std::vector<torch::Tensor> outputs(plan_.size());
  const auto input = [&](int from) -> const torch::Tensor& { return from < 0 ? images : outputs[static_cast<std::size_t>(from)]; };
  for (std::size_t i = 0; i < plan_.size(); ++i) {
    const Layer& layer = plan_[i];
    switch (layer.kind) {
      case Layer::conv: outputs[i] = layers_[i]->as<nn::BaseConv>()->forward(input(layer.from[0])); break;
      case Layer::pool: outputs[i] = at::max_pool2d(input(layer.from[0]), {2, 2}, {2, 2}); break;
      case Layer::upsample: outputs[i] = nn::upsample_nearest_2x(input(layer.from[0])); break;
      case Layer::concat: {
        std::vector<torch::Tensor> parts;
        for (const int f : layer.from) parts.push_back(input(f));
        outputs[i] = torch::cat(parts, 1);
        break;
      }
      case Layer::sppcsp: outputs[i] = layers_[i]->as<Sppcsp>()->forward(input(layer.from[0])); break;
      case Layer::repconv: outputs[i] = layers_[i]->as<RepConv>()->forward(input(layer.from[0])); break;
      case Layer::detect: {
        std::vector<torch::Tensor> maps;
        for (std::size_t level = 0; level < layer.from.size(); ++level) {
          maps.push_back(heads_[level]->as<IDetect>()->forward(input(layer.from[level])));
        }
        return maps;
      }
    }
  }
  return {};
}

}  // namespace libreyolo::models::yolo7
