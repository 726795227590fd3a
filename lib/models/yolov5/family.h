// YOLOv5 behind the Family interface (models/family.h): its network, decoder and recipe.
#pragma once

#include "models/family.h"

namespace libreyolo::models::yolov5 {

const Family& family();

}  // namespace libreyolo::models::yolov5
