#include "models/yolo9/recipe.h"

#include <array>

namespace libreyolo::models::yolo9 {

namespace {

using config::OptionSpec;
using config::Support;
using config::ValueType;

constexpr auto kKeys = std::to_array<OptionSpec>({
    {.name = "box", .type = ValueType::real, .default_value = "7.5", .group = "loss",
     .help = "box (CIoU) loss gain", .minimum = 0, .maximum = 1000, .support = Support::honoured},
    {.name = "cls", .type = ValueType::real, .default_value = "0.5", .group = "loss",
     .help = "classification (BCE) loss gain", .minimum = 0, .maximum = 1000, .support = Support::honoured},
    {.name = "dfl", .type = ValueType::real, .default_value = "1.5", .group = "loss",
     .help = "distribution focal loss gain", .minimum = 0, .maximum = 1000, .support = Support::honoured},
    {.name = "aux_weight", .type = ValueType::real, .default_value = "0.25", .group = "loss",
     .help = "weight of the PGI auxiliary branch's losses, trained beside the main head (0 = no branch)", .minimum = 0,
     .maximum = 1000, .support = Support::honoured},
});

}  // namespace

std::span<const config::OptionSpec> option_keys() { return kKeys; }

std::vector<config::OptionDefault> option_defaults(const std::string& size) {
  (void)size;  // every size trains with the same recipe
  return {
      {"sync_bn", "true"},
      {"momentum", "0.937"},
      {"scheduler", "linear"},
      {"warmup_epochs", "3"},
      {"warmup_lr_start", "0.0001"},
      {"warmup_momentum", "0.8"},
      {"no_aug_epochs", "15"},
      {"min_lr_ratio", "0.01"},
      {"degrees", "0.0"},
      {"shear", "0.0"},
      {"mosaic_scale", "(0.5,1.5)"},
      {"mixup", "0.0"},
      {"ema_decay", "0.9999"},
      {"name", "yolo9_exp"},
      {"workers", "8"},
      {"max_labels", "300"},
      {"aux_weight", "0.25"},
      {"copy_paste", "0.0"},
      {"rot90", "0.0"},
  };
}

}  // namespace libreyolo::models::yolo9
