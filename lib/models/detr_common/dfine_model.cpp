#include "models/detr_common/dfine_model.h"

#include "core/error.h"

#include <fmt/format.h>

#include <map>

namespace libreyolo::models::detr {

namespace {

const std::map<std::string, DfineConfig>& configs() {
  // LibreYOLO's table (D-FINE's configs/dfine/dfine_hgnetv2_<size>_coco.yml)
  static const std::map<std::string, DfineConfig> table{
      {"n", {.backbone = "B0", .learnable_affine = true, .returned = {2, 3}, .encoder_in = {512, 1024}, .strides = {16, 32},
             .encoder_hidden = 128, .encoder_feedforward = 512, .expansion = 0.34, .depth_mult = 0.5, .decoder_hidden = 128,
             .decoder_feedforward = 512, .layers = 3, .points = {6, 6}}},
      {"s", {.backbone = "B0", .learnable_affine = true, .returned = {1, 2, 3}, .encoder_in = {256, 512, 1024},
             .strides = {8, 16, 32}, .expansion = 0.5, .depth_mult = 0.34, .layers = 3, .points = {3, 6, 3}}},
      {"m", {.backbone = "B2", .learnable_affine = true, .returned = {1, 2, 3}, .encoder_in = {384, 768, 1536},
             .strides = {8, 16, 32}, .expansion = 1.0, .depth_mult = 0.67, .layers = 4, .points = {3, 6, 3}}},
      {"l", {.backbone = "B4", .returned = {1, 2, 3}, .frozen_norm = true, .encoder_in = {512, 1024, 2048}, .strides = {8, 16, 32},
             .layers = 6, .points = {3, 6, 3}}},
      {"x", {.backbone = "B5", .returned = {1, 2, 3}, .frozen_norm = true, .encoder_in = {512, 1024, 2048}, .strides = {8, 16, 32},
             .encoder_hidden = 384, .encoder_feedforward = 2048, .layers = 6, .points = {3, 6, 3}, .reg_scale = 8.0}},
  };
  return table;
}

}  // namespace

const std::vector<std::string>& dfine_sizes() {
  static const std::vector<std::string> sizes{"n", "s", "m", "l", "x"};
  return sizes;
}

DfineConfig dfine_config(const std::string& size) {
  const auto it = configs().find(size);
  if (it == configs().end()) throw ModelError(fmt::format("D-FINE size '{}' is not one of n, s, m, l, x", size));
  return it->second;
}

DfineModelImpl::DfineModelImpl(const DfineOptions& options) : options_(options) {
  const DfineConfig config = dfine_config(options.size);
  HgnetOptions backbone{.arch = config.backbone, .layout = HgnetLayout::dfine, .learnable_affine = config.learnable_affine,
                        .returned = config.returned};
  // D-FINE's (and RT-DETRv4's) freeze_stem_only with freeze_at 0; DEIM's -1
  backbone.freeze_stem = !options.scratch && options.variant != DfineVariant::deim;
  backbone.freeze_norm = !options.scratch && config.frozen_norm;
  backbone_ = register_module("backbone", HgnetV2(backbone));
  HybridEncoderOptions encoder;
  encoder.in_channels = config.encoder_in;
  encoder.hidden = config.encoder_hidden;
  encoder.feedforward = config.encoder_feedforward;
  encoder.expansion = config.expansion;
  encoder.blocks = FusionBlocks::elan;
  encoder.depth_mult = config.depth_mult;
  encoder_ = register_module("encoder", HybridEncoder(encoder));
  DfineDecoderOptions decoder;
  decoder.classes = options.classes;
  decoder.in_channels.assign(config.encoder_in.size(), config.encoder_hidden);
  decoder.hidden = config.decoder_hidden;
  decoder.queries = options.queries;
  decoder.layers = config.layers;
  decoder.feedforward = config.decoder_feedforward;
  decoder.points = config.points;
  decoder.reg_scale = config.reg_scale;
  decoder.strides = config.strides;
  if (options.variant != DfineVariant::dfine) decoder.activation = decoder.mlp_activation = Activation::silu;
  decoder_ = register_module("decoder", DfineDecoder(decoder));
}

DfineOutputs DfineModelImpl::forward(const torch::Tensor& images, const DenoisingQueries* denoising) {
  return decode(encode(images), denoising);
}

std::vector<torch::Tensor> DfineModelImpl::encode(const torch::Tensor& images) { return encoder_->forward(backbone_->forward(images)); }

DfineOutputs DfineModelImpl::decode(const std::vector<torch::Tensor>& features, const DenoisingQueries* denoising) {
  return decoder_->forward(features, denoising);
}

}  // namespace libreyolo::models::detr
