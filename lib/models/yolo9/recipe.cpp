#include "models/yolo9/recipe.h"

namespace libreyolo::models::yolo9 {

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
