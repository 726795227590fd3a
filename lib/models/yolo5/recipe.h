// YOLOv5's recipe: the option defaults of yolov5 7.0's train.py with hyp.scratch-low.yaml, where
// they differ from the table's.
#pragma once

#include "core/option_table.h"

#include <string>
#include <vector>

namespace libreyolo::models::yolo5 {

std::vector<config::OptionDefault> option_defaults(const std::string& size);

}  // namespace libreyolo::models::yolo5
