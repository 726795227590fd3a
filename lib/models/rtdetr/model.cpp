#include "models/rtdetr/model.h"

#include "core/error.h"

#include <fmt/format.h>

#include <map>

namespace libreyolo::models::detr {

namespace {

const std::map<std::string, RtdetrConfig>& configs() {
  static const std::map<std::string, RtdetrConfig> table{
      {"r18", {.depth = 18, .expansion = 0.5, .layers = 3}},
      {"r34", {.depth = 34, .expansion = 0.5, .layers = 4}},
      {"r50", {.depth = 50, .expansion = 1.0, .layers = 6, .frozen_norm = true}},
      {"r50m", {.depth = 50, .expansion = 0.5, .layers = 6, .eval_layer = 2, .frozen_norm = true}},
      {"r101", {.depth = 101, .encoder_hidden = 384, .encoder_feedforward = 2048, .expansion = 1.0, .layers = 6, .frozen_norm = true}},
      {"l", {.hgnet = "L", .expansion = 1.0, .layers = 6, .frozen_norm = true}},
      {"x", {.hgnet = "X", .encoder_hidden = 384, .encoder_feedforward = 2048, .expansion = 1.0, .layers = 6, .frozen_norm = true}},
  };
  return table;
}

}  // namespace

const std::vector<std::string>& rtdetr_sizes() {
  static const std::vector<std::string> sizes{"r18", "r34", "r50", "r50m", "r101", "l", "x"};
  return sizes;
}

RtdetrConfig rtdetr_config(const std::string& size) {
  const auto it = configs().find(size);
  if (it == configs().end()) {
    throw ModelError(fmt::format("RT-DETR size '{}' is not built here: use r18, r34, r50, r50m, r101, l or x", size));
  }
  return it->second;
}

std::vector<std::shared_ptr<torch::nn::Module>> RtdetrModelImpl::encode_modules() const {
  return {presnet_ ? presnet_.ptr() : std::static_pointer_cast<torch::nn::Module>(hgnet_.ptr()), encoder_.ptr()};
}

RtdetrModelImpl::RtdetrModelImpl(const RtdetrOptions& options) : options_(options) {
  const RtdetrConfig config = rtdetr_config(options.size);
  HybridEncoderOptions encoder;
  if (config.hgnet.empty()) {
    PResNetOptions backbone;
    backbone.depth = config.depth;
    backbone.freeze_at = options.scratch ? -1 : 0;
    backbone.freeze_norm = !options.scratch && config.frozen_norm;
    presnet_ = register_module("backbone", PResNet(backbone));
    encoder.in_channels = presnet_->out_channels();
  } else {
    HgnetOptions backbone{.arch = config.hgnet, .layout = HgnetLayout::rtdetr};
    backbone.freeze_stem = !options.scratch;
    backbone.freeze_norm = !options.scratch && config.frozen_norm;
    hgnet_ = register_module("backbone", HgnetV2(backbone));
    encoder.in_channels = hgnet_->out_channels();
  }
  encoder.hidden = config.encoder_hidden;
  encoder.feedforward = config.encoder_feedforward;
  encoder.expansion = config.expansion;
  encoder_ = register_module("encoder", HybridEncoder(encoder));
  RtdetrDecoderOptions decoder;
  decoder.classes = options.classes;
  decoder.in_channels = config.encoder_hidden;
  decoder.queries = options.queries;
  decoder.layers = config.layers;
  decoder.feedforward = config.decoder_feedforward;
  decoder.eval_layer = config.eval_layer;
  decoder_ = register_module("decoder", RtdetrDecoder(decoder));
}

DetrOutputs RtdetrModelImpl::forward(const torch::Tensor& images, const DenoisingQueries* denoising) {
  return decode(encode(images), denoising);
}

std::vector<torch::Tensor> RtdetrModelImpl::encode(const torch::Tensor& images) {
  return encoder_->forward(presnet_ ? presnet_->forward(images) : hgnet_->forward(images));
}

DetrOutputs RtdetrModelImpl::decode(const std::vector<torch::Tensor>& features, const DenoisingQueries* denoising) {
  return decoder_->forward(features, denoising);
}

}  // namespace libreyolo::models::detr
