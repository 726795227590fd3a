#include "models/detr_common/dfine_style_recipe.h"

#include <array>
#include <map>
#include <string_view>

namespace libreyolo::models::detr {

namespace {

constexpr auto kDfineKeys = std::to_array<config::OptionSpec>({
    {.name = "backbone_lr_mult", .type = config::ValueType::real, .default_value = "1.0", .group = "optimizer",
     .help = "learning-rate multiple of the backbone's groups (LibreYOLO's D-FINE fine-tune recipe: 0.5)", .minimum = 0,
     .maximum = 10, .support = config::Support::honoured},
    {.name = "ema_restart_decay", .type = config::ValueType::real, .default_value = "0.0", .group = "ema",
     .help = "where the no_aug_epochs begin, the EMA turns to this constant decay, without the ramp (LibreYOLO's D-FINE "
             "and DEIM trainers' 'EMA restart'; 0: never)", .minimum = 0, .maximum = 1, .support = config::Support::honoured},
});

}  // namespace

std::span<const config::OptionSpec> dfine_option_keys() { return kDfineKeys; }

std::vector<config::OptionDefault> dfine_option_defaults(const std::string& size) {
  (void)size;  // every size trains with the same recipe
  return {
      {"epochs", "132"},
      {"optimizer", "adamw"},
      {"lr0", "0.0002"},
      {"backbone_lr_mult", "0.5"},
      {"weight_decay", "0.0001"},
      {"scheduler", "flat_cosine"},
      {"warmup_epochs", "2"},
      {"warmup_lr_start", "0.000001"},
      {"min_lr_ratio", "0.05"},
      {"no_aug_epochs", "4"},
      {"aug_stop_epoch_ratio", "0.85"},
      {"clip_max_norm", "0.1"},
      {"ema_decay", "0.9999"},
      {"ema_restart_decay", "0.9999"},  // constant from the no-augmentation epochs on (on_mosaic_disable)
      {"amp", "false"},
      {"mosaic", "0.0"},
      {"mixup", "0.0"},
      {"hsv_prob", "0.0"},
      {"degrees", "0.0"},
      {"translate", "0.0"},
      {"shear", "0.0"},
      {"max_labels", "120"},
      {"multi_scale", "true"},
      {"eval_interval", "1"},
      {"name", "dfine_exp"},
  };
}

std::vector<config::OptionDefault> deim_option_defaults(const std::string& size) {
  // D-FINE's, with what DEIMConfig changes (its backbone at the schedule's rate: the table's 1.0)
  static const std::map<std::string_view, std::string_view> changes{
      {"lr0", "0.0001"},     {"no_aug_epochs", "12"}, {"aug_stop_epoch_ratio", "0.91"},
      {"degrees", "10.0"},   {"translate", "0.1"},    {"name", "deim_exp"}};
  std::vector<config::OptionDefault> defaults;
  for (const auto& item : dfine_option_defaults(size)) {
    if (item.key == "backbone_lr_mult") continue;
    const auto changed = changes.find(item.key);
    defaults.push_back(changed == changes.end() ? item : config::OptionDefault{item.key, changed->second});
  }
  defaults.push_back({"mosaic_scale", "(0.5,1.5)"});
  return defaults;
}

ParameterRules dfine_parameter_rules(double backbone_multiplier) {
  return [backbone_multiplier](std::string_view name) {
    const auto has = [name](std::string_view part) { return name.find(part) != std::string_view::npos; };
    const bool no_decay = has("norm") || has(".bn.") || has("bias") || has("lab.scale");
    if (name.starts_with("backbone.")) {
      return ParameterRule{.group = no_decay ? 3 : 2, .decay = !no_decay, .lr_multiplier = backbone_multiplier};
    }
    return ParameterRule{.group = no_decay ? 1 : 0, .decay = !no_decay};
  };
}

}  // namespace libreyolo::models::detr
