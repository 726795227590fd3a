// RT-DETR's recipe as LibreYOLO 1.6.0 trains it (models/rtdetr/config.py and trainer.py): the
// option defaults, and the optimizer groups (backbone at lr_backbone, no decay on norms and biases).
#pragma once

#include "core/option_table.h"
#include "models/family.h"

#include <span>
#include <string>
#include <vector>

namespace libreyolo::models::detr {

std::vector<config::OptionDefault> rtdetr_option_defaults(const std::string& size);
// RT-DETR's own key: its backbone's learning rate.
std::span<const config::OptionSpec> rtdetr_option_keys();

// The groups, first match wins: backbone norms (lr x `backbone_ratio`, no decay), the rest of the
// backbone (lr x `backbone_ratio`), encoder and decoder norms and biases (no decay), everything else.
ParameterRules rtdetr_parameter_rules(double backbone_ratio);

}  // namespace libreyolo::models::detr
