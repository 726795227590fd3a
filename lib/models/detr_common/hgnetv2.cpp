#include "models/detr_common/hgnetv2.h"

#include "core/error.h"
#include "models/detr_common/presnet.h"
#include "nn/sync_norm.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/nn/functional/padding.h>
#include <torch/nn/functional/pooling.h>
#include <torch/nn/init.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/padding.h>

#include <algorithm>
#include <array>
#include <map>

namespace libreyolo::models::detr {

namespace {

namespace F = torch::nn::functional;

struct StageSpec {
  int in, mid, out, blocks;
  bool downsample, light;
  int kernel, layers;
};

struct ArchSpec {
  int stem_mid, stem_out;
  std::array<StageSpec, 4> stages;
};

const ArchSpec& arch_spec(const std::string& name) {
  static const std::map<std::string, ArchSpec> table{
      {"B0", {16, 16, {{{16, 16, 64, 1, false, false, 3, 3}, {64, 32, 256, 1, true, false, 3, 3},
                        {256, 64, 512, 2, true, true, 5, 3}, {512, 128, 1024, 1, true, true, 5, 3}}}}},
      {"B1", {24, 32, {{{32, 32, 64, 1, false, false, 3, 3}, {64, 48, 256, 1, true, false, 3, 3},
                        {256, 96, 512, 2, true, true, 5, 3}, {512, 192, 1024, 1, true, true, 5, 3}}}}},
      {"B2", {24, 32, {{{32, 32, 96, 1, false, false, 3, 4}, {96, 64, 384, 1, true, false, 3, 4},
                        {384, 128, 768, 3, true, true, 5, 4}, {768, 256, 1536, 1, true, true, 5, 4}}}}},
      {"B3", {24, 32, {{{32, 32, 128, 1, false, false, 3, 5}, {128, 64, 512, 1, true, false, 3, 5},
                        {512, 128, 1024, 3, true, true, 5, 5}, {1024, 256, 2048, 1, true, true, 5, 5}}}}},
      {"B4", {32, 48, {{{48, 48, 128, 1, false, false, 3, 6}, {128, 96, 512, 1, true, false, 3, 6},
                        {512, 192, 1024, 3, true, true, 5, 6}, {1024, 384, 2048, 1, true, true, 5, 6}}}}},
      {"B5", {32, 64, {{{64, 64, 128, 1, false, false, 3, 6}, {128, 128, 512, 2, true, false, 3, 6},
                        {512, 256, 1024, 5, true, true, 5, 6}, {1024, 512, 2048, 2, true, true, 5, 6}}}}},
      {"B6", {48, 96, {{{96, 96, 192, 2, false, false, 3, 6}, {192, 192, 512, 3, true, false, 3, 6},
                        {512, 384, 1024, 6, true, true, 5, 6}, {1024, 768, 2048, 3, true, true, 5, 6}}}}},
  };
  static const std::map<std::string, std::string> rtdetr_names{{"L", "B4"}, {"X", "B5"}, {"H", "B6"}};
  const auto alias = rtdetr_names.find(name);
  const auto it = table.find(alias == rtdetr_names.end() ? name : alias->second);
  if (it == table.end()) throw ModelError(fmt::format("HGNetv2 architecture '{}' is not one of B0-B6, L, X, H", name));
  return it->second;
}

// A learnable scale and bias, after an activation (D-FINE's n, s and m).
class AffineImpl : public torch::nn::Module {
 public:
  AffineImpl()
      : scale_(register_parameter("scale", at::ones({1}))), bias_(register_parameter("bias", at::zeros({1}))) {}
  torch::Tensor forward(const torch::Tensor& x) { return scale_ * x + bias_; }

 private:
  torch::Tensor scale_, bias_;
};
TORCH_MODULE(Affine);

struct ConvSpec {
  int in, out, kernel, stride = 1, groups = 1;
  bool act = true;
  bool padded = false;  // a zero row and column after the input (2x2 "same"), no other padding
};

// Conv (no bias) + BatchNorm ("bn") + ReLU (+ the learnable affine, "lab").
class HgConvImpl : public torch::nn::Module {
 public:
  HgConvImpl(const ConvSpec& spec, const HgnetOptions& options) : act_(spec.act), padded_(spec.padded) {
    conv_ = torch::nn::Conv2d(torch::nn::Conv2dOptions(spec.in, spec.out, spec.kernel)
                                  .stride(spec.stride)
                                  .padding(spec.padded ? 0 : (spec.kernel - 1) / 2)
                                  .groups(spec.groups)
                                  .bias(false));
    if (spec.padded && options.layout == HgnetLayout::rtdetr) {
      torch::nn::Sequential padded_conv;  // RT-DETR's names: conv.0 the pad, conv.1 the conv
      padded_conv->push_back(torch::nn::ZeroPad2d(torch::nn::ZeroPad2dOptions({0, 1, 0, 1})));
      padded_conv->push_back(conv_);
      register_module("conv", padded_conv);
    } else {
      register_module("conv", conv_);
    }
    if (options.freeze_norm) {
      frozen_ = register_module("bn", FrozenBatchNorm2d(spec.out));
    } else {
      norm_ = register_module("bn", nn::SyncableBatchNorm2d(spec.out));
    }
    if (spec.act && options.learnable_affine) affine_ = register_module("lab", Affine());
  }

  torch::Tensor forward(const torch::Tensor& input) {
    torch::Tensor x = padded_ ? F::pad(input, F::PadFuncOptions({0, 1, 0, 1})) : input;
    x = conv_->forward(x);
    x = frozen_ ? frozen_->forward(x) : norm_->forward(x);
    if (act_) x = at::relu(x);
    return affine_ ? affine_->forward(x) : x;
  }

 private:
  torch::nn::Conv2d conv_{nullptr};
  nn::SyncableBatchNorm2d norm_{nullptr};
  FrozenBatchNorm2d frozen_{nullptr};
  Affine affine_{nullptr};
  bool act_, padded_;
};
TORCH_MODULE(HgConv);

// A light layer of an HG block: a 1x1 conv without activation, then a kxk depthwise conv.
class LightConvImpl : public torch::nn::Module {
 public:
  LightConvImpl(int in, int out, int kernel, const HgnetOptions& options)
      : first_(register_module("conv1", HgConv(ConvSpec{.in = in, .out = out, .kernel = 1, .act = false}, options))),
        second_(register_module("conv2", HgConv(ConvSpec{.in = out, .out = out, .kernel = kernel, .groups = out}, options))) {}
  torch::Tensor forward(const torch::Tensor& x) { return second_->forward(first_->forward(x)); }

 private:
  HgConv first_, second_;
};
TORCH_MODULE(LightConv);

class HgBlockImpl : public torch::nn::Module {
 public:
  HgBlockImpl(int in, const StageSpec& spec, bool residual, const HgnetOptions& options)
      : layers_(register_module("layers", torch::nn::ModuleList())), residual_(residual) {
    for (int i = 0; i < spec.layers; ++i) {
      const int layer_in = i == 0 ? in : spec.mid;
      if (spec.light) {
        layers_->push_back(LightConv(layer_in, spec.mid, spec.kernel, options));
      } else {
        layers_->push_back(HgConv(ConvSpec{.in = layer_in, .out = spec.mid, .kernel = spec.kernel}, options));
      }
    }
    const int total = in + spec.layers * spec.mid;
    squeeze_ = HgConv(ConvSpec{.in = total, .out = spec.out / 2, .kernel = 1}, options);
    excite_ = HgConv(ConvSpec{.in = spec.out / 2, .out = spec.out, .kernel = 1}, options);
    if (options.layout == HgnetLayout::rtdetr) {
      register_module("aggregation_squeeze_conv", squeeze_);
      register_module("aggregation_excitation_conv", excite_);
    } else {
      torch::nn::Sequential aggregation;
      aggregation->push_back(squeeze_);
      aggregation->push_back(excite_);
      register_module("aggregation", aggregation);
    }
  }

  torch::Tensor forward(const torch::Tensor& input) {
    std::vector<torch::Tensor> outputs{input};
    outputs.reserve(layers_->size() + 1);
    for (const auto& layer : *layers_) {
      auto* plain = layer->as<HgConvImpl>();
      outputs.push_back(plain ? plain->forward(outputs.back()) : layer->as<LightConvImpl>()->forward(outputs.back()));
    }
    torch::Tensor x = excite_->forward(squeeze_->forward(at::cat(outputs, 1)));
    return residual_ ? x + input : x;
  }

 private:
  torch::nn::ModuleList layers_;
  HgConv squeeze_{nullptr}, excite_{nullptr};
  bool residual_;
};
TORCH_MODULE(HgBlock);

class HgStageImpl : public torch::nn::Module {
 public:
  HgStageImpl(const StageSpec& spec, const HgnetOptions& options) {
    if (spec.downsample) {
      downsample_ = register_module(
          "downsample",
          HgConv(ConvSpec{.in = spec.in, .out = spec.in, .kernel = 3, .stride = 2, .groups = spec.in, .act = false}, options));
    }
    blocks_ = register_module("blocks", torch::nn::ModuleList());
    for (int i = 0; i < spec.blocks; ++i) blocks_->push_back(HgBlock(i == 0 ? spec.in : spec.out, spec, i != 0, options));
  }
  torch::Tensor forward(torch::Tensor x) {
    if (downsample_) x = downsample_->forward(x);
    for (const auto& block : *blocks_) x = block->as<HgBlockImpl>()->forward(x);
    return x;
  }

 private:
  HgConv downsample_{nullptr};
  torch::nn::ModuleList blocks_{nullptr};
};
TORCH_MODULE(HgStage);

}  // namespace

// stem1 (3x3, stride 2); then stem2a and stem2b (2x2 "same") beside a 2x2 max pool of the padded
// map, concatenated; stem3 (3x3, stride 2) and stem4 (1x1).
class HgStemImpl : public torch::nn::Module {
 public:
  HgStemImpl(int mid, int out, const HgnetOptions& options)
      : stem1_(register_module("stem1", HgConv(ConvSpec{.in = 3, .out = mid, .kernel = 3, .stride = 2}, options))),
        stem2a_(register_module("stem2a", HgConv(ConvSpec{.in = mid, .out = mid / 2, .kernel = 2, .padded = true}, options))),
        stem2b_(register_module("stem2b", HgConv(ConvSpec{.in = mid / 2, .out = mid, .kernel = 2, .padded = true}, options))),
        stem3_(register_module("stem3", HgConv(ConvSpec{.in = mid * 2, .out = mid, .kernel = 3, .stride = 2}, options))),
        stem4_(register_module("stem4", HgConv(ConvSpec{.in = mid, .out = out, .kernel = 1}, options))) {}

  torch::Tensor forward(const torch::Tensor& input) {
    const torch::Tensor x = stem1_->forward(input);
    const torch::Tensor branch = stem2b_->forward(stem2a_->forward(x));
    const torch::Tensor pooled =
        F::max_pool2d(F::pad(x, F::PadFuncOptions({0, 1, 0, 1})), F::MaxPool2dFuncOptions(2).stride(1).ceil_mode(true));
    return stem4_->forward(stem3_->forward(at::cat({pooled, branch}, 1)));
  }

 private:
  HgConv stem1_, stem2a_, stem2b_, stem3_, stem4_;
};

HgnetV2Impl::HgnetV2Impl(const HgnetOptions& options) : options_(options) {
  const ArchSpec& spec = arch_spec(options.arch);
  for (const int stage : options.returned) {
    if (stage < 0 || stage > 3) throw ModelError(fmt::format("HGNetv2: stage {} is not one of 0-3", stage));
  }
  stem_ = std::make_shared<HgStemImpl>(spec.stem_mid, spec.stem_out, options);
  register_module("stem", stem_);
  stages_ = register_module("stages", torch::nn::ModuleList());
  for (const StageSpec& stage : spec.stages) {
    stages_->push_back(HgStage(stage, options));
    stage_channels_.push_back(stage.out);
  }
  if (options.layout == HgnetLayout::rtdetr) {  // RT-DETR's initialisation (D-FINE keeps LibTorch's defaults)
    torch::NoGradGuard no_grad;
    for (const auto& module : modules(/*include_self=*/false)) {
      if (auto* conv = module->as<torch::nn::Conv2dImpl>()) torch::nn::init::kaiming_normal_(conv->weight);
    }
  }
  const auto freeze = [](torch::nn::Module& module) {
    for (auto& parameter : module.parameters()) parameter.set_requires_grad(false);
  };
  if (options.freeze_stem) freeze(*stem_);
  for (int i = 0; i < std::min(options.frozen_stages, 4); ++i) freeze(*stages_[static_cast<std::size_t>(i)]);
}

std::vector<torch::Tensor> HgnetV2Impl::forward(const torch::Tensor& input) {
  torch::Tensor x = stem_->forward(input);
  std::vector<torch::Tensor> outputs;
  for (std::size_t i = 0; i < stages_->size(); ++i) {
    x = stages_[i]->as<HgStageImpl>()->forward(x);
    if (std::find(options_.returned.begin(), options_.returned.end(), static_cast<int>(i)) != options_.returned.end()) {
      outputs.push_back(x);
    }
  }
  return outputs;
}

std::vector<int> HgnetV2Impl::out_channels() const {
  std::vector<int> channels;
  for (const int stage : options_.returned) channels.push_back(stage_channels_[static_cast<std::size_t>(stage)]);
  return channels;
}

}  // namespace libreyolo::models::detr
