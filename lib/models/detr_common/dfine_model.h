// D-FINE as LibreYOLO builds it: HGNetv2 ("backbone", D-FINE's layout), the hybrid encoder with
// RepNCSPELAN4 fusion ("encoder") and the FDR decoder ("decoder"), per size n, s, m, l and x (n: two
// levels at strides 16 and 32). Trained from scratch nothing is frozen; from weights, as LibreYOLO
// does, the stem is frozen and l and x freeze their backbone norms. DEIM is the same network, sizes
// and weight names with SiLU in the decoder's feed-forward and heads, and from weights only l and
// x's norms frozen; RT-DETRv4 is D-FINE's with SiLU heads (sizes s to x).
#pragma once

#include "models/detr_common/denoising.h"
#include "models/detr_common/dfine_decoder.h"
#include "models/detr_common/hgnetv2.h"
#include "models/detr_common/hybrid_encoder.h"

#include <torch/nn/module.h>

#include <string>
#include <vector>

namespace libreyolo::models::detr {

struct DfineConfig {
  std::string backbone;          // HGNetv2 architecture
  bool learnable_affine = false;
  std::vector<int> returned;     // backbone stages
  bool frozen_norm = false;      // the backbone's norms, when not from scratch
  std::vector<int> encoder_in;   // the encoder's input channels
  std::vector<int> strides;
  int encoder_hidden = 256, encoder_feedforward = 1024;
  double expansion = 1.0, depth_mult = 1.0;
  int decoder_hidden = 256, decoder_feedforward = 1024;
  int layers = 6;
  std::vector<int> points;
  double reg_scale = 4.0;
};

const std::vector<std::string>& dfine_sizes();
// Throws ModelError for a size not in dfine_sizes().
DfineConfig dfine_config(const std::string& size);

// Which network of the three: DEIM and RT-DETRv4 put SiLU in the decoder's feed-forward and heads;
// DEIM freezes no stem when trained from weights.
enum class DfineVariant { dfine, deim, rtdetrv4 };

struct DfineOptions {
  std::string size = "n";
  int classes = 80;
  int queries = 300;
  bool scratch = true;  // false: the stem frozen (D-FINE), and the backbone norms where the size freezes them
  DfineVariant variant = DfineVariant::dfine;
};

class DfineModelImpl : public torch::nn::Module {
 public:
  explicit DfineModelImpl(const DfineOptions& options);
  DfineOutputs forward(const torch::Tensor& images, const DenoisingQueries* denoising = nullptr);
  // forward() in two parts, as RtdetrModel: the backbone and encoder (a CUDA graph's region), then the decoder.
  std::vector<torch::Tensor> encode(const torch::Tensor& images);
  DfineOutputs decode(const std::vector<torch::Tensor>& features, const DenoisingQueries* denoising = nullptr);
  std::vector<std::shared_ptr<torch::nn::Module>> encode_modules() const { return {backbone_.ptr(), encoder_.ptr()}; }
  const DfineOptions& options() const { return options_; }
  const DfineDecoderOptions& decoder_options() const { return decoder_->options(); }
  const DfineDecoder& decoder() const { return decoder_; }

 private:
  DfineOptions options_;
  HgnetV2 backbone_{nullptr};
  HybridEncoder encoder_{nullptr};
  DfineDecoder decoder_{nullptr};
};
TORCH_MODULE(DfineModel);

}  // namespace libreyolo::models::detr
