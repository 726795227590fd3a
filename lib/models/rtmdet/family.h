// RTMDet behind the Family interface (models/family.h): its network, decoder, loss and recipe.
#pragma once

#include "models/family.h"

namespace libreyolo::models::rtmdet {

const Family& family();

}  // namespace libreyolo::models::rtmdet
