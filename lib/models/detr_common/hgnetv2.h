// HGNetv2 (PP-HGNetV2), the backbone of RT-DETR-l/x and of every D-FINE and DEIM size: a stem of
// 2x2 "same" convolutions beside a max pool, then four stages of HG blocks (a chain of convolutions,
// plain or light: 1x1 then depthwise, whose outputs and input are concatenated and aggregated by two
// 1x1 convolutions; blocks after a stage's first add their input). Returns the maps of the stages
// in `returned` (strides 4, 8, 16, 32 for stages 0-3).
//
// The architectures are shared (RT-DETR's L and X are D-FINE's B4 and B5); the two references name
// two submodules differently, so `layout` picks the weight names a LibreYOLO state dict uses:
//   rtdetr: a padded conv is conv.1 (a ZeroPad2d, then the conv), aggregation_squeeze_conv and
//           aggregation_excitation_conv; convolutions Kaiming-normal initialised as RT-DETR does;
//   dfine:  a padded conv is conv (the pad in the stem's forward), aggregation.0 and aggregation.1;
//           LibTorch's default initialisation, as D-FINE's.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>

#include <string>
#include <vector>

namespace libreyolo::models::detr {

enum class HgnetLayout { rtdetr, dfine };

struct HgnetOptions {
  std::string arch = "B0";         // B0..B6; L (= B4), X (= B5), H (= B6) as RT-DETR names them
  HgnetLayout layout = HgnetLayout::dfine;
  bool learnable_affine = false;   // a learnable scale and bias after each activation (D-FINE n/s/m)
  std::vector<int> returned{1, 2, 3};
  bool freeze_stem = false;        // the stem takes no gradient
  int frozen_stages = 0;           // and neither do the first this-many stages
  bool freeze_norm = false;        // every BatchNorm frozen (FrozenBatchNorm2d)
};

class HgStemImpl;

class HgnetV2Impl : public torch::nn::Module {
 public:
  explicit HgnetV2Impl(const HgnetOptions& options);
  std::vector<torch::Tensor> forward(const torch::Tensor& x);
  // Channels of the returned maps.
  std::vector<int> out_channels() const;

 private:
  HgnetOptions options_;
  std::vector<int> stage_channels_;
  std::shared_ptr<HgStemImpl> stem_;
  torch::nn::ModuleList stages_{nullptr};
};
TORCH_MODULE(HgnetV2);

}  // namespace libreyolo::models::detr
