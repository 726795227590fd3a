// LibreYOLO's YOLOXConfig: the option defaults YOLOX trains with, where they differ from the table's
// (nano and tiny have their own input size and jitter); YOLOv7's configuration builds on it.
#pragma once

#include "core/option_table.h"

#include <string>
#include <vector>

namespace libreyolo::models::yolo_common {

std::vector<config::OptionDefault> yolox_config_defaults(const std::string& size);

}  // namespace libreyolo::models::yolo_common
