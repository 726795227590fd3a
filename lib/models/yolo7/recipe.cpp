#include "models/yolo7/recipe.h"

#include "models/yolo_common/yolox_config.h"

#include <algorithm>

namespace libreyolo::models::yolo7 {

std::vector<config::OptionDefault> option_defaults(const std::string& size) {
  (void)size;  // one size, b
  std::vector<config::OptionDefault> defaults = yolo_common::yolox_config_defaults("s");  // YOLOXConfig's, full-size jitter
  const auto set = [&](const char* key, const char* value) {
    const auto it = std::find_if(defaults.begin(), defaults.end(), [&](const auto& d) { return d.key == key; });
    if (it != defaults.end()) it->value = value;
    else defaults.push_back({key, value});
  };
  set("momentum", "0.937");
  set("warmup_epochs", "3");
  set("ema_decay", "0.9999");
  set("max_labels", "100");
  return defaults;
}

}  // namespace libreyolo::models::yolo7
