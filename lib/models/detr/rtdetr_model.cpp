#include "models/detr/rtdetr_model.h"

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
  };
  return table;
}

}  // namespace

const std::vector<std::string>& rtdetr_sizes() {
  static const std::vector<std::string> sizes{"r18", "r34", "r50", "r50m", "r101"};
  return sizes;
}

RtdetrConfig rtdetr_config(const std::string& size) {
  const auto it = configs().find(size);
  if (it == configs().end()) {
    throw ModelError(fmt::format("RT-DETR size '{}' is not built here: use r18, r34, r50, r50m or r101 (l and x, on an "
                                 "HGNetv2 backbone, are not yet)", size));
  }
  return it->second;
}

RtdetrModelImpl::RtdetrModelImpl(const RtdetrOptions& options) : options_(options) {
  const RtdetrConfig config = rtdetr_config(options.size);
  PResNetOptions backbone;
  backbone.depth = config.depth;
  backbone.freeze_at = options.scratch ? -1 : 0;
  backbone.freeze_norm = !options.scratch && config.frozen_norm;
  backbone_ = register_module("backbone", PResNet(backbone));
  HybridEncoderOptions encoder;
  encoder.in_channels = backbone_->out_channels();
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
  return encoder_->forward(backbone_->forward(images));
}

DetrOutputs RtdetrModelImpl::decode(const std::vector<torch::Tensor>& features, const DenoisingQueries* denoising) {
  return decoder_->forward(features, denoising);
}

}  // namespace libreyolo::models::detr
