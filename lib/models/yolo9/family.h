// YOLOv9 behind the Family interface (models/family.h): its network, loss, postprocess and recipe.
#pragma once

#include "models/family.h"

namespace libreyolo::models::yolo9 {

const Family& family();

}  // namespace libreyolo::models::yolo9
