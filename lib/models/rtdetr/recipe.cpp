#include "models/rtdetr/recipe.h"

namespace libreyolo::models::detr {

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
