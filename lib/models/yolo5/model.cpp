#include "models/yolo5/model.h"

#include "core/error.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/nn/modules/linear.h>

#include <cmath>

namespace libreyolo::models::yolo5 {

namespace {

// models/yolov5{n,s,m,l,x}.yaml: depth and width multiples.
constexpr std::array<SizeSpec, 5> kSizes{{
    {"n", 0.33, 0.25},
    {"s", 0.33, 0.50},
    {"m", 0.67, 0.75},
    {"l", 1.00, 1.00},
    {"x", 1.33, 1.25},
}};

// parse_model's rules: channels rounded up to a multiple of 8, repeats max(round(n x depth), 1)
// (no product of these depths and repeats is a .5 tie, so Python's rounding is lround's).
int channels(int base, double width) { return static_cast<int>(std::ceil(base * width / 8.0)) * 8; }
int repeats(int base, double depth) { return base > 1 ? std::max(static_cast<int>(std::lround(base * depth)), 1) : base; }

}  // namespace

const SizeSpec& size_spec(std::string_view size) {
  for (const auto& spec : kSizes) {
    if (spec.name == size) return spec;
  }
  throw ModelError(fmt::format("yolov5{}: unknown size; sizes are n, s, m, l, x", size));
}

BottleneckImpl::BottleneckImpl(int in_channels, int out_channels, bool shortcut)
    : add_(shortcut && in_channels == out_channels) {
  cv1_ = register_module("cv1", nn::BaseConv(in_channels, out_channels, 1, 1));
  cv2_ = register_module("cv2", nn::BaseConv(out_channels, out_channels, 3, 1));
}

torch::Tensor BottleneckImpl::forward(const torch::Tensor& x) {
  torch::Tensor y = cv2_(cv1_(x));
  return add_ ? x + y : y;
}

C3Impl::C3Impl(int in_channels, int out_channels, int depth, bool shortcut) {
  const int hidden = out_channels / 2;
  cv1_ = register_module("cv1", nn::BaseConv(in_channels, hidden, 1, 1));
  cv2_ = register_module("cv2", nn::BaseConv(in_channels, hidden, 1, 1));
  cv3_ = register_module("cv3", nn::BaseConv(2 * hidden, out_channels, 1, 1));
  m_ = register_module("m", torch::nn::Sequential());
  for (int i = 0; i < depth; ++i) m_->push_back(Bottleneck(hidden, hidden, shortcut));
}

torch::Tensor C3Impl::forward(const torch::Tensor& x) { return cv3_(torch::cat({m_->forward(cv1_(x)), cv2_(x)}, 1)); }

SppfImpl::SppfImpl(int in_channels, int out_channels) {
  const int hidden = in_channels / 2;
  cv1_ = register_module("cv1", nn::BaseConv(in_channels, hidden, 1, 1));
  cv2_ = register_module("cv2", nn::BaseConv(hidden * 4, out_channels, 1, 1));
}

torch::Tensor SppfImpl::forward(const torch::Tensor& x) {
  const torch::Tensor a = cv1_(x);
  const torch::Tensor b = at::max_pool2d(a, {5, 5}, {1, 1}, {2, 2});
  const torch::Tensor c = at::max_pool2d(b, {5, 5}, {1, 1}, {2, 2});
  const torch::Tensor d = at::max_pool2d(c, {5, 5}, {1, 1}, {2, 2});
  return cv2_(torch::cat({a, b, c, d}, 1));
}

DetectImpl::DetectImpl(int class_count, const std::array<int, 3>& in_channels) : class_count_(class_count) {
  at::Tensor grid_anchors = at::empty({3, kAnchorsPerLevel, 2});
  for (int level = 0; level < 3; ++level) {
    for (int k = 0; k < 2 * kAnchorsPerLevel; ++k) {
      grid_anchors[level][k / 2][k % 2] = kDefaultAnchors[level][k] / static_cast<float>(kStrides[level]);
    }
  }
  anchors = register_buffer("anchors", grid_anchors);
  m_ = register_module("m", torch::nn::ModuleList());
  for (const int channels_in : in_channels) {
    m_->push_back(torch::nn::Conv2d(torch::nn::Conv2dOptions(channels_in, kAnchorsPerLevel * (5 + class_count), 1)));
  }
  initialize_biases();
}

void DetectImpl::initialize_biases() {
  torch::NoGradGuard no_grad;
  for (int level = 0; level < 3; ++level) {
    const double cells = 640.0 / kStrides[level];
    at::Tensor bias = m_[level]->as<torch::nn::Conv2d>()->bias.view({kAnchorsPerLevel, 5 + class_count_});
    bias.select(1, 4).add_(std::log(8.0 / (cells * cells)));
    bias.slice(1, 5).add_(std::log(0.6 / (class_count_ - 0.99999)));
  }
}

std::vector<torch::Tensor> DetectImpl::forward(const std::vector<torch::Tensor>& features) {
  std::vector<torch::Tensor> maps;
  for (std::size_t level = 0; level < features.size(); ++level) {
    maps.push_back(m_[level]->as<torch::nn::Conv2d>()->forward(features[level]));
  }
  maps.push_back(anchors);
  return maps;
}

ModelImpl::ModelImpl(std::string_view size, int class_count) : spec_(size_spec(size)), class_count_(class_count) {
  const double d = spec_.depth, w = spec_.width;
  const int c64 = channels(64, w), c128 = channels(128, w), c256 = channels(256, w), c512 = channels(512, w),
            c1024 = channels(1024, w);
  layers_ = register_module("model", torch::nn::ModuleList());
  // Upsampling and concatenation hold no weights; placeholders keep the indices of yolov5s.yaml.
  const auto placeholder = [] { return torch::nn::Identity(); };
  layers_->push_back(nn::BaseConv(3, c64, 6, 2));                        // 0  (k6 s2 p2)
  layers_->push_back(nn::BaseConv(c64, c128, 3, 2));                     // 1  P2/4
  layers_->push_back(C3(c128, c128, repeats(3, d), true));               // 2
  layers_->push_back(nn::BaseConv(c128, c256, 3, 2));                    // 3  P3/8
  layers_->push_back(C3(c256, c256, repeats(6, d), true));               // 4
  layers_->push_back(nn::BaseConv(c256, c512, 3, 2));                    // 5  P4/16
  layers_->push_back(C3(c512, c512, repeats(9, d), true));               // 6
  layers_->push_back(nn::BaseConv(c512, c1024, 3, 2));                   // 7  P5/32
  layers_->push_back(C3(c1024, c1024, repeats(3, d), true));             // 8
  layers_->push_back(Sppf(c1024, c1024));                                // 9
  layers_->push_back(nn::BaseConv(c1024, c512, 1, 1));                   // 10
  layers_->push_back(placeholder());                                     // 11 upsample
  layers_->push_back(placeholder());                                     // 12 cat with 6
  layers_->push_back(C3(2 * c512, c512, repeats(3, d), false));          // 13
  layers_->push_back(nn::BaseConv(c512, c256, 1, 1));                    // 14
  layers_->push_back(placeholder());                                     // 15 upsample
  layers_->push_back(placeholder());                                     // 16 cat with 4
  layers_->push_back(C3(2 * c256, c256, repeats(3, d), false));          // 17 P3 out
  layers_->push_back(nn::BaseConv(c256, c256, 3, 2));                    // 18
  layers_->push_back(placeholder());                                     // 19 cat with 14
  layers_->push_back(C3(2 * c256, c512, repeats(3, d), false));          // 20 P4 out
  layers_->push_back(nn::BaseConv(c512, c512, 3, 2));                    // 21
  layers_->push_back(placeholder());                                     // 22 cat with 10
  layers_->push_back(C3(2 * c512, c1024, repeats(3, d), false));         // 23 P5 out
  detect_ = Detect(class_count, std::array<int, 3>{c256, c512, c1024});
  layers_->push_back(detect_);                                           // 24
}

std::vector<torch::Tensor> ModelImpl::forward(const torch::Tensor& images) {
  const auto conv = [this](int index, const torch::Tensor& x) { return layers_[index]->as<nn::BaseConv>()->forward(x); };
  const auto c3 = [this](int index, const torch::Tensor& x) { return layers_[index]->as<C3>()->forward(x); };
  torch::Tensor x = c3(2, conv(1, conv(0, images)));
  const torch::Tensor p3 = c3(4, conv(3, x));
  const torch::Tensor p4 = c3(6, conv(5, p3));
  x = layers_[9]->as<Sppf>()->forward(c3(8, conv(7, p4)));
  const torch::Tensor l10 = conv(10, x);
  x = c3(13, torch::cat({nn::upsample_nearest_2x(l10), p4}, 1));
  const torch::Tensor l14 = conv(14, x);
  const torch::Tensor out3 = c3(17, torch::cat({nn::upsample_nearest_2x(l14), p3}, 1));
  const torch::Tensor out4 = c3(20, torch::cat({conv(18, out3), l14}, 1));
  const torch::Tensor out5 = c3(23, torch::cat({conv(21, out4), l10}, 1));
  return detect_(std::vector<torch::Tensor>{out3, out4, out5});
}

}  // namespace libreyolo::models::yolo5
