// RT-DETR as LibreYOLO builds it: a backbone ("backbone": PResNet for r18, r34, r50, r50m and
// r101, HGNetv2-L and -X for l and x), hybrid encoder ("encoder") and decoder ("decoder"). Trained from scratch, the backbone's norms train and nothing is frozen; from a checkpoint,
// as LibreYOLO does, the stem is frozen and r50 and up freeze their backbone norms.
#pragma once

#include "models/detr_common/denoising.h"
#include "models/detr_common/hgnetv2.h"
#include "models/detr_common/hybrid_encoder.h"
#include "models/detr_common/presnet.h"
#include "models/detr_common/rtdetr_decoder.h"

#include <torch/nn/module.h>

#include <string>
#include <vector>

namespace libreyolo::models::detr {

struct RtdetrConfig {
  int depth = 18;           // PResNet's, where hgnet is empty
  std::string hgnet{};      // an HGNetv2 architecture (L, X) in place of PResNet
  int encoder_hidden = 256, encoder_feedforward = 1024;
  double expansion = 0.5;
  int decoder_feedforward = 1024;
  int layers = 3;
  int eval_layer = -1;
  bool frozen_norm = false;  // the backbone's norms, when not from scratch
};

// The sizes built here, and each one's configuration. Throws ModelError for another size.
const std::vector<std::string>& rtdetr_sizes();
RtdetrConfig rtdetr_config(const std::string& size);

struct RtdetrOptions {
  std::string size = "r18";
  int classes = 80;
  int queries = 300;
  bool scratch = true;  // false: the stem frozen, and the backbone norms where the size freezes them
};

class RtdetrModelImpl : public torch::nn::Module {
 public:
  explicit RtdetrModelImpl(const RtdetrOptions& options);
  // `denoising`: the training batch's denoising queries (train mode only).
  DetrOutputs forward(const torch::Tensor& images, const DenoisingQueries* denoising = nullptr);
  // forward() in two parts: the backbone and the encoder (tensors in, tensors out: the region a
  // CUDA graph may hold), then the decoder, whose denoising queries follow each batch's targets.
  std::vector<torch::Tensor> encode(const torch::Tensor& images);
  DetrOutputs decode(const std::vector<torch::Tensor>& features, const DenoisingQueries* denoising = nullptr);
  // The modules encode() runs (their parameters and buffers are a graph's).
  std::vector<std::shared_ptr<torch::nn::Module>> encode_modules() const;
  const RtdetrOptions& options() const { return options_; }
  const RtdetrDecoderOptions& decoder_options() const { return decoder_->options(); }

 private:
  RtdetrOptions options_;
  PResNet presnet_{nullptr};  // one of the two backbones
  HgnetV2 hgnet_{nullptr};
  HybridEncoder encoder_{nullptr};
  RtdetrDecoder decoder_{nullptr};
};
TORCH_MODULE(RtdetrModel);

}  // namespace libreyolo::models::detr
