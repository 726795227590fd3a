// YOLOv5's recipe: the option defaults of yolov5 7.0's train.py with hyp.scratch-low.yaml, where
// they differ from the table's.
#pragma once

#include "core/option_table.h"

#include <span>
#include <string>
#include <vector>

namespace libreyolo::models::yolo5 {

std::vector<config::OptionDefault> option_defaults(const std::string& size);
// YOLOv5's own keys: its loss gains (hyp.scratch-low's), the anchor threshold and AutoAnchor.
std::span<const config::OptionSpec> option_keys();

}  // namespace libreyolo::models::yolo5
