#include "models/yolo_common/yolox_config.h"

namespace libreyolo::models::yolo_common {

std::vector<config::OptionDefault> yolox_config_defaults(const std::string& size) {
  std::vector<config::OptionDefault> defaults{
      {"sync_bn", "true"},
      {"momentum", "0.9"},
      {"scheduler", "yoloxwarmcos"},
      {"warmup_epochs", "5"},
      {"warmup_lr_start", "0.0"},
      {"no_aug_epochs", "15"},
      {"min_lr_ratio", "0.05"},
      {"degrees", "10.0"},
      {"shear", "2.0"},
      {"mosaic_scale", "(0.1,2.0)"},
      {"mixup", "1.0"},
      {"ema_decay", "0.9998"},
      {"name", "exp"},
  };
  // YOLOX-nano/-tiny recipes: 416 input, milder scale jitter, no mixup (nano: mosaic 0.5).
  if (size == "n" || size == "t") {
    defaults.insert(defaults.end(), {{"imgsz", "416"}, {"mosaic_scale", "(0.5,1.5)"}, {"mixup", "0.0"}});
  }
  if (size == "n") defaults.push_back({"mosaic", "0.5"});
  return defaults;
}

}  // namespace libreyolo::models::yolo_common
