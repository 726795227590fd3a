#include "models/rtmdet/recipe.h"

namespace libreyolo::models::rtmdet {

std::vector<config::OptionDefault> option_defaults(const std::string& size) {
  (void)size;  // every size trains with one recipe
  return {
      {"optimizer", "adamw"},
      {"lr0", "0.004"},
      {"weight_decay", "0.05"},
      {"momentum", "0.9"},
      {"scheduler", "yoloxwarmcos"},
      {"warmup_epochs", "1"},
      {"warmup_lr_start", "4e-8"},
      {"min_lr_ratio", "0.05"},
      {"no_aug_epochs", "20"},
      {"degrees", "0.0"},
      {"translate", "0.0"},
      {"shear", "0.0"},
      {"mosaic_scale", "(0.1,2.0)"},
      {"mixup", "1.0"},
      {"max_labels", "120"},
      {"ema_decay", "0.9998"},
      {"sync_bn", "true"},
      {"name", "exp"},
  };
}

}  // namespace libreyolo::models::rtmdet
