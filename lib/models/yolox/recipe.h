// YOLOX's recipe: the option defaults its reference trains with, where they differ from the table's
// (LibreYOLO's YOLOX configuration; nano and tiny have their own input size and jitter).
#pragma once

#include "core/option_table.h"

#include <string>
#include <vector>

namespace libreyolo::models::yolox {

std::vector<config::OptionDefault> option_defaults(const std::string& size);

}  // namespace libreyolo::models::yolox
