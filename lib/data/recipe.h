// Which augmentation pipeline a training runs: its model family's (models::Family::augment_recipe).
#pragma once

#include <string_view>

namespace libreyolo::data {

enum class Recipe { yolo9, yolox };
std::string_view recipe_name(Recipe recipe);

}  // namespace libreyolo::data
