// What libreyolo 1.6.0's two classifier families (MobileNetV4, ResNet) share behind the Family
// interface: task=classify, ImageNet-normalised RGB input, cross-entropy on the logits, the YOLO
// trainers' parameter groups (norm weights and biases without decay), the recipe of its
// MobileNetV4Config/ResNetConfig (AdamW 1e-3, weight decay 1e-4, one epoch of quadratic warm-up then
// cosine to 0.01 x, 100 epochs, batch 64, EMA, validation every epoch) and the classification
// keys (crop_scale, crop_pct and the optional augmentations). A family folder adds its network.
#pragma once

#include "models/family.h"

#include <fmt/format.h>

#include <span>
#include <string>
#include <vector>

namespace libreyolo::models::classify_common {

// A classifier network (a TORCH_MODULE whose forward gives the logits) as a Model: its logits are
// its one map, in either mode; nothing to fuse.
template <class Net>
Model classifier_model(Net net, std::string display_name, int default_image_size) {
  Model model;
  model.display_name = std::move(display_name);
  model.default_image_size = default_image_size;
  model.module = net.ptr();
  model.forward = [net](const at::Tensor& x) mutable { return std::vector<at::Tensor>{net->forward(x)}; };
  model.forward_raw = model.forward;
  model.fuse = [] {};
  return model;
}

class ClassifierFamily : public Family {
 public:
  std::string_view weights_suffix() const override { return "-cls"; }
  std::string_view task() const override { return "classify"; }
  at::Tensor network_input(const at::Tensor& images, const c10::Device& device) const override;
  std::vector<std::string> loss_names() const override { return {"ce_loss"}; }
  std::unique_ptr<TrainingLoss> make_loss(const LossContext& context, const config::Config& config) const override;
  // oneDNN's channels-last convolutions: one epoch of 512 photos at 224, batch 64, on a 2-core EPYC,
  // mobilenetv4-s 10.0 s against 13.6 s NCHW, resnet-18 44.8/52.3 s against 52.1/55.2 s
  bool channels_last_on_cpu() const override { return true; }
  bool warms_up_momentum() const override { return false; }
  std::shared_ptr<const data::SamplePipeline> sample_pipeline() const override { return nullptr; }
  // the logits are all there is: validation reads them, no confidence threshold
  double validation_confidence() const override { return 0.0; }
  std::span<const config::OptionSpec> options() const override;
  std::vector<config::OptionDefault> option_defaults(const std::string& size) const override;

 protected:
  // The family's own defaults for a size: imgsz and crop_pct (LibreYOLO's INPUT_SIZES and CROP_PCT).
  virtual std::vector<config::OptionDefault> size_defaults(const std::string& size) const = 0;
};

}  // namespace libreyolo::models::classify_common
