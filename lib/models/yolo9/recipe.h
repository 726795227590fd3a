// YOLOv9's recipe: the option defaults its reference trains with, where they differ from the
// table's (LibreYOLO's YOLOv9 configuration).
#pragma once

#include "core/option_table.h"

#include <span>
#include <string>
#include <vector>

namespace libreyolo::models::yolo9 {

std::vector<config::OptionDefault> option_defaults(const std::string& size);
// YOLOv9's own keys: its loss gains and the PGI branch's weight.
std::span<const config::OptionSpec> option_keys();

}  // namespace libreyolo::models::yolo9
