#include "models/yolo5/recipe.h"

#include <array>

namespace libreyolo::models::yolo5 {

namespace {

using config::OptionSpec;
using config::Support;
using config::ValueType;

constexpr auto kKeys = std::to_array<OptionSpec>({
    {.name = "box", .type = ValueType::real, .default_value = "0.05", .group = "loss",
     .help = "hyp box (CIoU) gain, scaled by 3 / levels", .minimum = 0, .maximum = 1000, .support = Support::honoured},
    {.name = "cls", .type = ValueType::real, .default_value = "0.5", .group = "loss",
     .help = "hyp cls (BCE) gain, scaled by classes / 80", .minimum = 0, .maximum = 1000, .support = Support::honoured},
    {.name = "obj", .type = ValueType::real, .default_value = "1.0", .group = "loss",
     .help = "objectness (BCE) loss gain, scaled by (imgsz / 640)^2 as its train.py does", .minimum = 0, .maximum = 1000,
     .support = Support::honoured},
    {.name = "autoanchor", .type = ValueType::boolean, .default_value = "true", .group = "loss",
     .help = "before training, measure the anchors' best possible recall on the training labels and, at 0.98 or less, "
             "evolve new ones (k-means, then a genetic search) and keep them if they fit better (train.py's "
             "--noautoanchor is autoanchor=false)", .support = Support::honoured},
    {.name = "anchor_t", .type = ValueType::real, .default_value = "4.0", .group = "loss",
     .help = "a box matches an anchor while neither side is more than anchor_t times the anchor's or less than "
             "1/anchor_t (also AutoAnchor's threshold)", .minimum = 1, .maximum = 100, .support = Support::honoured},
});

}  // namespace

std::span<const config::OptionSpec> option_keys() { return kKeys; }

std::vector<config::OptionDefault> option_defaults(const std::string& size) {
  (void)size;  // every size trains with hyp.scratch-low
  return {
      {"momentum", "0.937"},
      {"scheduler", "linear_epoch"},  // LambdaLR per epoch: lf(e) = (1 - e/epochs)(1 - lrf) + lrf
      {"min_lr_ratio", "0.01"},  // lrf
      {"warmup_epochs", "3"},
      {"warmup_momentum", "0.8"},
      {"warmup_bias_lr", "0.1"},
      {"nbs", "64"},  // train.py's nominal batch: accumulation ramped over the warm-up, weight_decay scaled
      {"no_aug_epochs", "0"},  // yolov5 keeps mosaic to the last epoch
      {"degrees", "0.0"},
      {"shear", "0.0"},
      {"mosaic_scale", "(0.5,1.5)"},  // scale 0.5
      {"mixup", "0.0"},
      {"ema_decay", "0.9999"},
      {"name", "exp"},
  };
}

}  // namespace libreyolo::models::yolo5
