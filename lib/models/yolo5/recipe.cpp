#include "models/yolo5/recipe.h"

namespace libreyolo::models::yolo5 {

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
      {"box", "0.05"},
      {"cls", "0.5"},
      {"name", "exp"},
  };
}

}  // namespace libreyolo::models::yolo5
