// YOLOv7-b behind the Family interface (models/family.h): its network, decoder, loss and recipe.
#pragma once

#include "models/family.h"

namespace libreyolo::models::yolo7 {

const Family& family();

}  // namespace libreyolo::models::yolo7
