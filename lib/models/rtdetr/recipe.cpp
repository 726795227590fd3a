#include "models/rtdetr/recipe.h"

#include <array>

namespace libreyolo::models::detr {

namespace {

constexpr auto kRtdetrKeys = std::to_array<config::OptionSpec>({
    {.name = "lr_backbone", .type = config::ValueType::real, .default_value = "0.0", .group = "optimizer",
     .help = "learning rate of the backbone (its groups train at lr_backbone / lr0 of the schedule's rate; 0: lr0's)",
     .minimum = 0, .maximum = 1, .support = config::Support::honoured},
});

}  // namespace

std::span<const config::OptionSpec> rtdetr_option_keys() { return kRtdetrKeys; }

std::vector<config::OptionDefault> rtdetr_option_defaults(const std::string& size) {
  (void)size;  // every size trains with the same recipe
  return {
      {"epochs", "72"},
      {"batch", "4"},
      {"optimizer", "adamw"},
      {"lr0", "0.0001"},
      {"lr_backbone", "0.000005"},
      {"weight_decay", "0.0001"},
      {"scheduler", "constant"},
      {"warmup_epochs", "0"},
      {"no_aug_epochs", "0"},
      {"clip_max_norm", "0.1"},
      {"ema_decay", "0.9999"},
      {"mosaic", "0.0"},
      {"mixup", "0.0"},
      {"hsv_prob", "0.5"},
      {"degrees", "0.0"},
      {"shear", "0.0"},
      {"eval_interval", "1"},
      {"name", "rtdetr_exp"},
  };
}

ParameterRules rtdetr_parameter_rules(double backbone_ratio) {
  return [backbone_ratio](std::string_view name) {
    const auto has = [name](std::string_view part) { return name.find(part) != std::string_view::npos; };
    if (has("backbone")) {
      const bool norm = has("norm") || has("bn");
      return ParameterRule{.group = norm ? 0 : 1, .decay = !norm, .lr_multiplier = backbone_ratio};
    }
    if ((has("encoder") || has("decoder")) && (has("norm") || has("bias"))) return ParameterRule{.group = 2, .decay = false};
    return ParameterRule{.group = 3};
  };
}

}  // namespace libreyolo::models::detr
