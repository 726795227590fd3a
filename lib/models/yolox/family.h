// YOLOX behind the Family interface (models/family.h): its network, loss, postprocess and recipe.
#pragma once

#include "models/family.h"

namespace libreyolo::models::yolox {

const Family& family();

}  // namespace libreyolo::models::yolox
