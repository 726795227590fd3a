// RTMDet's recipe as libreyolo 1.6.0 trains it (RTMDetConfig): AdamW 0.004 with weight decay 0.05,
// a one-epoch quadratic warm-up, cosine to 5% and flat for the last 20 epochs without mosaic and
// mixup, EMA 0.9998, YOLOX's augmentations at scale 0.1-2.0 without rotation, shear or translation.
#pragma once

#include "core/option_table.h"

#include <string>
#include <vector>

namespace libreyolo::models::rtmdet {

std::vector<config::OptionDefault> option_defaults(const std::string& size);

}  // namespace libreyolo::models::rtmdet
