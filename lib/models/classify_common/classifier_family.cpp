#include "models/classify_common/classifier_family.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <array>

namespace libreyolo::models::classify_common {

namespace {

using config::OptionSpec;
using config::Support;
using config::ValueType;

constexpr unsigned kTrain = config::command_train | config::command_data;
constexpr unsigned kEval = config::command_train | config::command_val | config::command_predict | config::command_profile;

constexpr auto kKeys = std::to_array<OptionSpec>({
    {.name = "crop_scale", .type = ValueType::real, .default_value = "0.5", .group = "augmentation",
     .help = "RandomResizedCrop's smallest share of the image area: the crop covers crop_scale to 1.0 of it (LibreYOLO's "
             "classification scale=x; scale= itself is Ultralytics' name of mosaic_scale)",
     .commands = kTrain, .minimum = 0.01, .maximum = 1, .support = Support::honoured},
    {.name = "crop_pct", .type = ValueType::real, .default_value = "0.875", .group = "augmentation",
     .help = "validation and predict: the shorter side is resized to floor(imgsz / crop_pct), then the centre imgsz square "
             "is cropped (LibreYOLO's CROP_PCT: mobilenetv4-s 0.875, the others 0.95)",
     .commands = kEval, .minimum = 0.05, .maximum = 1, .support = Support::honoured},
    {.name = "cutmix", .type = ValueType::real, .default_value = "0.0", .group = "augmentation",
     .help = "probability of CutMix with soft labels (LibreYOLO's classify option); not built yet: only 0 is accepted",
     .commands = kTrain, .minimum = 0, .maximum = 1, .support = Support::refused,
     .why = "MixUp/CutMix with soft labels is not built for classification yet"},
    {.name = "erasing", .type = ValueType::real, .default_value = "0.0", .group = "augmentation",
     .help = "probability of RandomErasing (LibreYOLO's classify option); not built yet: only 0 is accepted",
     .commands = kTrain, .minimum = 0, .maximum = 0.99, .support = Support::refused,
     .why = "RandomErasing is not built for classification yet"},
    {.name = "auto_augment", .type = ValueType::choice, .default_value = "none", .group = "augmentation",
     .help = "RandAugment, AutoAugment or AugMix (LibreYOLO's classify option); not built yet: only none is accepted",
     .commands = kTrain, .choices = "randaugment autoaugment augmix", .nullable = true, .support = Support::refused,
     .why = "torchvision's automatic augmentation policies are not built for classification yet"},
});

// F.cross_entropy on the logits; in data-parallel training the sum over the rank's images divided
// by the global batch's share (so the averaged gradients are one process's over the same images).
class CrossEntropyLoss final : public TrainingLoss {
 public:
  explicit CrossEntropyLoss(const LossContext& context) : global_(context.global_normaliser) {}
  LossTerms operator()(const std::vector<at::Tensor>& maps, const TargetBatch& targets) const override {
    const at::Tensor logits = maps.at(0).to(at::kFloat);
    at::Tensor loss;
    if (global_) {
      const at::Tensor count = at::scalar_tensor(static_cast<double>(logits.size(0)), logits.options());
      loss = at::cross_entropy_loss(logits, targets.classes, {}, at::Reduction::Sum) / global_(count);
    } else {
      loss = at::cross_entropy_loss(logits, targets.classes);
    }
    return {loss, {{"ce_loss", loss.detach()}}};
  }
  std::string capture_obstacle() const override { return {}; }

 private:
  GlobalNormaliser global_;
};

}  // namespace

at::Tensor ClassifierFamily::network_input(const at::Tensor& images, const c10::Device& device) const {
  // torchvision's ToTensor (x / 255) then Normalize ((x - mean) / std), float32, in that order
  static const at::Tensor mean = at::tensor({0.485f, 0.456f, 0.406f}).view({1, 3, 1, 1});
  static const at::Tensor std = at::tensor({0.229f, 0.224f, 0.225f}).view({1, 3, 1, 1});
  const at::Tensor x = images.to(device, /*non_blocking=*/true).to(at::kFloat).div(255);
  return x.sub(mean.to(device)).div(std.to(device));
}

std::unique_ptr<TrainingLoss> ClassifierFamily::make_loss(const LossContext& context, const config::Config&) const {
  return std::make_unique<CrossEntropyLoss>(context);
}

std::span<const config::OptionSpec> ClassifierFamily::options() const { return kKeys; }

std::vector<config::OptionDefault> ClassifierFamily::option_defaults(const std::string& size) const {
  std::vector<config::OptionDefault> defaults{
      {"epochs", "100"},
      {"batch", "64"},
      {"optimizer", "adamw"},
      {"lr0", "0.001"},
      {"weight_decay", "0.0001"},
      {"scheduler", "yoloxwarmcos"},
      {"warmup_epochs", "1"},
      {"warmup_lr_start", "0.0"},
      {"no_aug_epochs", "0"},
      {"min_lr_ratio", "0.01"},
      {"mixup", "0.0"},
      {"ema_decay", "0.9998"},
      {"eval_interval", "1"},
      {"name", "exp"},
  };
  if (!size.empty()) {
    for (const auto& entry : size_defaults(size)) defaults.push_back(entry);
  }
  return defaults;
}

}  // namespace libreyolo::models::classify_common
