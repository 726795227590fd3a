#include "models/yolox/model.h"

#include "core/error.h"

#include <fmt/format.h>

#include <array>
#include <cmath>

namespace libreyolo::models::yolox {

namespace {

constexpr std::array<SizeSpec, 6> kSizes{{
    {"n", 0.33, 0.25, true, 416},
    {"t", 0.33, 0.375, false, 416},
    {"s", 0.33, 0.50, false, 640},
    {"m", 0.67, 0.75, false, 640},
    {"l", 1.00, 1.00, false, 640},
    {"x", 1.33, 1.25, false, 640},
}};

// Python's round() for the depths used here (no .5 ties occur).
int round_depth(double value) { return static_cast<int>(std::lround(value)); }

torch::nn::Sequential stage(int in_channels, int out_channels, int depth, bool depthwise) {
  torch::nn::Sequential sequential;
  sequential->push_back(nn::make_conv(in_channels, out_channels, 3, 2, depthwise));
  sequential->push_back(nn::CSPLayer(out_channels, out_channels, depth, true, depthwise));
  return sequential;
}

}  // namespace

const SizeSpec& size_spec(std::string_view size) {
  for (const auto& spec : kSizes) {
    if (spec.name == size) return spec;
  }
  throw ModelError(fmt::format("yolox-{}: unknown size; sizes are n, t, s, m, l, x", size));
}

CSPDarknetImpl::CSPDarknetImpl(double depth, double width, bool depthwise) {
  const int base = static_cast<int>(width * 64);
  const int base_depth = std::max(round_depth(depth * 3), 1);
  stem_ = register_module("stem", nn::Focus(3, base, 3));
  dark2_ = register_module("dark2", stage(base, base * 2, base_depth, depthwise));
  dark3_ = register_module("dark3", stage(base * 2, base * 4, base_depth * 3, depthwise));
  dark4_ = register_module("dark4", stage(base * 4, base * 8, base_depth * 3, depthwise));
  dark5_ = torch::nn::Sequential();
  dark5_->push_back(nn::make_conv(base * 8, base * 16, 3, 2, depthwise));
  dark5_->push_back(nn::SPPBottleneck(base * 16, base * 16));
  dark5_->push_back(nn::CSPLayer(base * 16, base * 16, base_depth, false, depthwise));
  register_module("dark5", dark5_);
}

std::vector<torch::Tensor> CSPDarknetImpl::forward(const torch::Tensor& x) {
  torch::Tensor y = dark2_->forward(stem_(x));
  torch::Tensor c3 = dark3_->forward(y);
  torch::Tensor c4 = dark4_->forward(c3);
  torch::Tensor c5 = dark5_->forward(c4);
  return {c3, c4, c5};
}

PafpnImpl::PafpnImpl(double depth, double width, bool depthwise) {
  const int c3 = static_cast<int>(256 * width);
  const int c4 = static_cast<int>(512 * width);
  const int c5 = static_cast<int>(1024 * width);
  const int n = round_depth(3 * depth);
  backbone_ = register_module("backbone", CSPDarknet(depth, width, depthwise));
  lateral_conv0_ = register_module("lateral_conv0", nn::BaseConv(c5, c4, 1, 1));
  c3_p4_ = register_module("C3_p4", nn::CSPLayer(static_cast<int>(2 * 512 * width), c4, n, false, depthwise));
  reduce_conv1_ = register_module("reduce_conv1", nn::BaseConv(c4, c3, 1, 1));
  c3_p3_ = register_module("C3_p3", nn::CSPLayer(static_cast<int>(2 * 256 * width), c3, n, false, depthwise));
  bu_conv2_ = nn::make_conv(c3, c3, 3, 2, depthwise);
  register_module("bu_conv2", bu_conv2_.ptr());
  c3_n3_ = register_module("C3_n3", nn::CSPLayer(static_cast<int>(2 * 256 * width), c4, n, false, depthwise));
  bu_conv1_ = nn::make_conv(c4, c4, 3, 2, depthwise);
  register_module("bu_conv1", bu_conv1_.ptr());
  c3_n4_ = register_module("C3_n4", nn::CSPLayer(static_cast<int>(2 * 512 * width), c5, n, false, depthwise));
}

std::vector<torch::Tensor> PafpnImpl::forward(const torch::Tensor& x) {
  const auto features = backbone_(x);
  const torch::Tensor fpn_out0 = lateral_conv0_(features[2]);
  const torch::Tensor f_out0 = c3_p4_(torch::cat({nn::upsample_nearest_2x(fpn_out0), features[1]}, 1));
  const torch::Tensor fpn_out1 = reduce_conv1_(f_out0);
  const torch::Tensor pan_out2 = c3_p3_(torch::cat({nn::upsample_nearest_2x(fpn_out1), features[0]}, 1));
  const torch::Tensor pan_out1 = c3_n3_(torch::cat({bu_conv2_.forward(pan_out2), fpn_out1}, 1));
  const torch::Tensor pan_out0 = c3_n4_(torch::cat({bu_conv1_.forward(pan_out1), fpn_out0}, 1));
  return {pan_out2, pan_out1, pan_out0};
}

HeadImpl::HeadImpl(int class_count, double width, bool depthwise) {
  const int hidden = static_cast<int>(256 * width);
  // Registration order = YOLOX's (state-dict and optimizer-group order follow it).
  cls_convs_ = register_module("cls_convs", torch::nn::ModuleList());
  reg_convs_ = register_module("reg_convs", torch::nn::ModuleList());
  cls_preds_ = register_module("cls_preds", torch::nn::ModuleList());
  reg_preds_ = register_module("reg_preds", torch::nn::ModuleList());
  obj_preds_ = register_module("obj_preds", torch::nn::ModuleList());
  stems_ = register_module("stems", torch::nn::ModuleList());
  for (const int in_channels : {256, 512, 1024}) {
    stems_->push_back(nn::BaseConv(static_cast<int>(in_channels * width), hidden, 1, 1));
    for (auto* convs : {&cls_convs_, &reg_convs_}) {
      torch::nn::Sequential tower;
      tower->push_back(nn::make_conv(hidden, hidden, 3, 1, depthwise));
      tower->push_back(nn::make_conv(hidden, hidden, 3, 1, depthwise));
      (*convs)->push_back(tower);
    }
    cls_preds_->push_back(torch::nn::Conv2d(torch::nn::Conv2dOptions(hidden, class_count, 1)));
    reg_preds_->push_back(torch::nn::Conv2d(torch::nn::Conv2dOptions(hidden, 4, 1)));
    obj_preds_->push_back(torch::nn::Conv2d(torch::nn::Conv2dOptions(hidden, 1, 1)));
  }
  initialize_biases(0.01);
}

void HeadImpl::initialize_biases(double prior_probability) {
  torch::NoGradGuard no_grad;
  const double bias = -std::log((1 - prior_probability) / prior_probability);
  for (auto* preds : {&cls_preds_, &obj_preds_}) {
    for (const auto& module : **preds) module->as<torch::nn::Conv2d>()->bias.fill_(bias);
  }
}

std::vector<torch::Tensor> HeadImpl::forward(const std::vector<torch::Tensor>& features, bool probabilities) {
  std::vector<torch::Tensor> outputs;
  for (std::size_t level = 0; level < features.size(); ++level) {
    const torch::Tensor x = stems_[level]->as<nn::BaseConv>()->forward(features[level]);
    const torch::Tensor cls_feature = cls_convs_[level]->as<torch::nn::Sequential>()->forward(x);
    const torch::Tensor reg_feature = reg_convs_[level]->as<torch::nn::Sequential>()->forward(x);
    torch::Tensor cls = cls_preds_[level]->as<torch::nn::Conv2d>()->forward(cls_feature);
    const torch::Tensor box = reg_preds_[level]->as<torch::nn::Conv2d>()->forward(reg_feature);
    torch::Tensor obj = obj_preds_[level]->as<torch::nn::Conv2d>()->forward(reg_feature);
    if (probabilities) {
      obj = obj.sigmoid();
      cls = cls.sigmoid();
    }
    outputs.push_back(torch::cat({box, obj, cls}, 1));
  }
  return outputs;
}

ModelImpl::ModelImpl(std::string_view size, int class_count) : spec_(size_spec(size)), class_count_(class_count) {
  backbone_ = register_module("backbone", Pafpn(spec_.depth, spec_.width, spec_.depthwise));
  head_ = register_module("head", Head(class_count, spec_.width, spec_.depthwise));
}

std::vector<torch::Tensor> ModelImpl::forward(const torch::Tensor& images) {
  return head_(backbone_(images), !is_training());
}

std::vector<torch::Tensor> ModelImpl::forward_raw(const torch::Tensor& images) { return head_(backbone_(images), false); }

}  // namespace libreyolo::models::yolox
