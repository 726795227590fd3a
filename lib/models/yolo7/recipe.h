// YOLOv7-b's recipe as libreyolo 1.6.0 trains it: YOLOX's configuration with momentum 0.937, three
// warm-up epochs and EMA 0.9999 (YOLOv7Config), where it differs from the table's.
#pragma once

#include "core/option_table.h"

#include <string>
#include <vector>

namespace libreyolo::models::yolo7 {

std::vector<config::OptionDefault> option_defaults(const std::string& size);

}  // namespace libreyolo::models::yolo7
