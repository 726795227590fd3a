// RT-DETRv4 (s, m, l, x): D-FINE's network with SiLU heads and D-FINE's freezing, trained by DEIM's
// trainer (MAL, DEIM's pipeline) with RTDETRv4Config's rates: lr 5e-4, weight decay 1.25e-4, 58 epochs.
#include "models/detr_common/dfine_style_family.h"
#include "models/detr_common/dfine_style_recipe.h"

#include <map>
#include <string_view>

namespace libreyolo::models::rtdetrv4 {

namespace {

// RTDETRv4Config, a DEIMConfig: DEIM's recipe with its own rates
std::vector<config::OptionDefault> option_defaults(const std::string& size) {
  static const std::map<std::string_view, std::string_view> changes{
      {"lr0", "0.0005"}, {"weight_decay", "0.000125"}, {"epochs", "58"}, {"name", "rtdetrv4_exp"}};
  std::vector<config::OptionDefault> defaults;
  for (const auto& item : detr::deim_option_defaults(size)) {
    const auto changed = changes.find(item.key);
    defaults.push_back(changed == changes.end() ? item : config::OptionDefault{item.key, changed->second});
  }
  return defaults;
}

}  // namespace

const Family& family() {
  static const auto instance = detr::make_dfine_style_family({
      .name = "rtdetrv4",
      .display = "RT-DETRv4",
      .weights_prefix = "LibreRTDETRv4",
      .sizes = {"s", "m", "l", "x"},
      .network = detr::DfineVariant::rtdetrv4,
      .deim_trainer = true,
      // its released checkpoints hold the projector its distillation trains (LibreYOLO drops it);
      // they hold D-FINE's keys too, so this recognition comes first
      .recognises_key = [](std::string_view name) { return name.starts_with("encoder.feature_projector."); },
      .key_precedence = 2,
      .training_only_prefix = "encoder.feature_projector.",
      .training_only_branch = "the distillation projector (encoder.feature_projector.*)",
      .option_defaults = option_defaults,
  });
  return *instance;
}

}  // namespace libreyolo::models::rtdetrv4
