#include "models/yolo9/model.h"

#include "core/error.h"

#include <fmt/format.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>

namespace libreyolo::models::yolo9 {

namespace {

// LibreYOLO's YOLO9_CONFIGS.
constexpr std::array<SizeSpec, 4> kSizes{{
    {"t", 16, 32, true, 32, 32, false, {{{64, 64, 64}, {96, 96, 96}, {128, 128, 128}}}, 128, 3,
     {96, 96}, {64, 64}, 48, {96, 96}, 64, {128, 128}, {64, 96, 128}},
    {"s", 32, 64, true, 64, 64, false, {{{128, 128, 128}, {192, 192, 192}, {256, 256, 256}}}, 256, 3,
     {192, 192}, {128, 128}, 96, {192, 192}, 128, {256, 256}, {128, 192, 256}},
    {"m", 32, 64, false, 128, 128, false, {{{240, 240, 240}, {360, 360, 360}, {480, 480, 480}}}, 480, 1,
     {360, 360}, {240, 240}, 184, {360, 360}, 240, {480, 480}, {240, 360, 480}},
    {"c", 64, 128, false, 256, 128, true, {{{256, 512, 256}, {512, 512, 512}, {512, 512, 512}}}, 512, 1,
     {512, 512}, {256, 256}, 256, {512, 512}, 512, {512, 512}, {256, 512, 512}},
}};

torch::nn::AnyModule downsample(bool adown, int in_channels, int out_channels) {
  if (adown) return torch::nn::AnyModule(nn::ADown(in_channels, out_channels));
  return torch::nn::AnyModule(nn::AConv(in_channels, out_channels));
}

nn::RepNCSPELAN elan(int in_channels, const std::array<int, 2>& out_part, int depth) {
  return nn::RepNCSPELAN(in_channels, out_part[1], out_part[1] / 2, out_part[0], depth);
}

int round_up(int value, int multiple) { return (value + multiple - 1) / multiple * multiple; }

}  // namespace

const SizeSpec& size_spec(std::string_view size) {
  for (const auto& spec : kSizes) {
    if (spec.name == size) return spec;
  }
  throw ModelError(fmt::format("yolo9-{}: unknown size; sizes are t, s, m, c", size));
}

Backbone9Impl::Backbone9Impl(const SizeSpec& spec) {
  conv0_ = register_module("conv0", nn::BaseConv(3, spec.conv0, 3, 2));
  conv1_ = register_module("conv1", nn::BaseConv(spec.conv0, spec.conv1, 3, 2));
  const int part = spec.first_block_part;
  elan1_ = spec.first_block_elan
               ? torch::nn::AnyModule(nn::ELAN(spec.conv1, part, part / 2, spec.first_block_out))
               : torch::nn::AnyModule(nn::RepNCSPELAN(spec.conv1, part, part / 2, spec.first_block_out, spec.depth));
  register_module("elan1", elan1_.ptr());
  int previous = spec.first_block_out;
  torch::nn::AnyModule* downs[3] = {&down2_, &down3_, &down4_};
  nn::RepNCSPELAN* elans[3] = {&elan2_, &elan3_, &elan4_};
  for (int i = 0; i < 3; ++i) {
    const auto& stage = spec.stages[i];
    *downs[i] = downsample(spec.adown, previous, stage[0]);
    register_module(fmt::format("down{}", i + 2), downs[i]->ptr());
    *elans[i] = register_module(fmt::format("elan{}", i + 2),
                                nn::RepNCSPELAN(stage[0], stage[2], stage[2] / 2, stage[1], spec.depth));
    previous = stage[1];
  }
  spp_ = register_module("spp", nn::SPPELAN(previous, spec.spp_out / 2, spec.spp_out));
}

std::vector<torch::Tensor> Backbone9Impl::forward_with_b5(const torch::Tensor& x) {
  torch::Tensor y = elan1_.forward(conv1_(conv0_(x)));
  const torch::Tensor p3 = elan2_(down2_.forward(y));
  const torch::Tensor p4 = elan3_(down3_.forward(p3));
  const torch::Tensor b5 = elan4_(down4_.forward(p4));
  return {p3, p4, spp_(b5), b5};
}

std::vector<torch::Tensor> Backbone9Impl::forward(const torch::Tensor& x) {
  auto features = forward_with_b5(x);
  features.pop_back();
  return features;
}

AuxNeck9Impl::AuxNeck9Impl(const SizeSpec& spec) {
  const int b3 = spec.stages[0][1], b4 = spec.stages[1][1], b5 = spec.stages[2][1];
  spp_ = register_module("spp", nn::SPPELAN(b5, spec.spp_out / 2, spec.spp_out));
  const auto [a4_out, a4_part] = spec.neck_up1;
  elan_a4_ = register_module("elan_a4", nn::RepNCSPELAN(spec.spp_out + b4, a4_part, a4_part / 2, a4_out, spec.depth));
  const auto [a3_out, a3_part] = spec.neck_up2;
  elan_a3_ = register_module("elan_a3", nn::RepNCSPELAN(a4_out + b3, a3_part, a3_part / 2, a3_out, spec.depth));
}

std::vector<torch::Tensor> AuxNeck9Impl::forward(const torch::Tensor& p3, const torch::Tensor& p4, const torch::Tensor& b5) {
  const torch::Tensor a5 = spp_(b5);
  const torch::Tensor a4 = elan_a4_(torch::cat({nn::upsample_nearest_2x(a5), p4}, 1));
  const torch::Tensor a3 = elan_a3_(torch::cat({nn::upsample_nearest_2x(a4), p3}, 1));
  return {a3, a4, a5};
}

Neck9Impl::Neck9Impl(const SizeSpec& spec) {
  const int b3 = spec.stages[0][1];
  const int b4 = spec.stages[1][1];
  elan_up1_ = register_module("elan_up1", elan(spec.spp_out + b4, spec.neck_up1, spec.depth));
  elan_up2_ = register_module("elan_up2", elan(spec.neck_up1[0] + b3, spec.neck_up2, spec.depth));
  down1_ = downsample(spec.adown, spec.neck_up2[0], spec.neck_down1_out);
  register_module("down1", down1_.ptr());
  elan_down1_ = register_module("elan_down1", elan(spec.neck_down1_out + spec.neck_up1[0], spec.neck_down1, spec.depth));
  down2_ = downsample(spec.adown, spec.neck_down1[0], spec.neck_down2_out);
  register_module("down2", down2_.ptr());
  elan_down2_ = register_module("elan_down2", elan(spec.neck_down2_out + spec.spp_out, spec.neck_down2, spec.depth));
}

std::vector<torch::Tensor> Neck9Impl::forward(const std::vector<torch::Tensor>& features) {
  const torch::Tensor n4 = elan_up1_(torch::cat({nn::upsample_nearest_2x(features[2]), features[1]}, 1));
  const torch::Tensor p3 = elan_up2_(torch::cat({nn::upsample_nearest_2x(n4), features[0]}, 1));
  const torch::Tensor p4 = elan_down1_(torch::cat({down1_.forward(p3), n4}, 1));
  const torch::Tensor p5 = elan_down2_(torch::cat({down2_.forward(p4), features[2]}, 1));
  return {p3, p4, p5};
}

namespace {
int formula_width(int first_channels, int class_count) { return std::max(first_channels, std::min(class_count, 100)); }
}  // namespace

int class_tower_width(std::string_view size, int class_count) {
  return formula_width(size_spec(size).head_channels[0], class_count);
}

bool is_aux_tensor(std::string_view name) { return name.starts_with("aux.") || name.starts_with("aux_head."); }

DDetectImpl::DDetectImpl(int class_count, const std::array<int, 3>& channels, int class_hidden_width) {
  constexpr int kGroups = 4;
  const int box_outputs = 4 * kRegMax;
  const int box_hidden = std::max({round_up(channels[0] / 4, kGroups), box_outputs, kRegMax});
  const int class_hidden = class_hidden_width > 0 ? class_hidden_width : formula_width(channels[0], class_count);
  cv2_ = register_module("cv2", torch::nn::ModuleList());
  cv3_ = register_module("cv3", torch::nn::ModuleList());
  torch::NoGradGuard no_grad;
  for (const int in_channels : channels) {
    torch::nn::Conv2d box_out(torch::nn::Conv2dOptions(box_hidden, box_outputs, 1).groups(kGroups));
    box_out->bias.fill_(1.0);
    cv2_->push_back(torch::nn::Sequential(nn::BaseConv(in_channels, box_hidden, 3, 1),
                                          nn::BaseConv(box_hidden, box_hidden, 3, 1, kGroups), box_out));
    torch::nn::Conv2d class_out(torch::nn::Conv2dOptions(class_hidden, class_count, 1));
    class_out->bias.fill_(-10.0);  // LibreYOLO's prior: sigmoid(-10) ~ 4.5e-5 per class
    cv3_->push_back(torch::nn::Sequential(nn::BaseConv(in_channels, class_hidden, 3, 1),
                                          nn::BaseConv(class_hidden, class_hidden, 3, 1), class_out));
  }
}

std::vector<torch::Tensor> DDetectImpl::forward(const std::vector<torch::Tensor>& features) {
  std::vector<torch::Tensor> outputs;
  for (std::size_t level = 0; level < features.size(); ++level) {
    outputs.push_back(torch::cat({cv2_[level]->as<torch::nn::Sequential>()->forward(features[level]),
                                  cv3_[level]->as<torch::nn::Sequential>()->forward(features[level])},
                                 1));
  }
  return outputs;
}

ModelImpl::ModelImpl(std::string_view size, int class_count, int class_hidden)
    : spec_(size_spec(size)), class_count_(class_count) {
  backbone_ = register_module("backbone", Backbone9(spec_));
  neck_ = register_module("neck", Neck9(spec_));
  head_ = register_module("head", DDetect(class_count, spec_.head_channels, class_hidden));
}

std::vector<torch::Tensor> ModelImpl::forward(const torch::Tensor& images) { return head_(neck_(backbone_(images))); }

void ModelImpl::enable_aux() {
  if (has_aux()) return;
  aux_ = register_module("aux", AuxNeck9(spec_));
  aux_head_ = register_module("aux_head", DDetect(class_count_, spec_.head_channels));
}

std::pair<std::vector<torch::Tensor>, std::vector<torch::Tensor>> ModelImpl::forward_with_aux(const torch::Tensor& images) {
  if (!has_aux()) throw std::logic_error("forward_with_aux: enable_aux() first");
  const auto features = backbone_->forward_with_b5(images);
  const std::vector<torch::Tensor> pyramid{features[0], features[1], features[2]};
  auto main = head_(neck_(pyramid));
  auto auxiliary = aux_head_(aux_(features[0], features[1], features[3]));
  return {std::move(main), std::move(auxiliary)};
}

void ModelImpl::fuse() { nn::fuse_for_inference(*this); }

}  // namespace libreyolo::models::yolo9
