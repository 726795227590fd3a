// YOLOv9's decoder: raw head maps to boxes and per-class scores (before NMS).
#pragma once

#include "models/decode.h"

#include <ATen/Tensor.h>

#include <vector>

namespace libreyolo::models {

// YOLOv9 (DDetect): per level [B, 4*reg_max + nc, H, W] raw maps; anchors at cell centres,
// distances = softmax-weighted bins x stride.
Decoded decode_yolo9(const std::vector<at::Tensor>& maps, int reg_max, const std::vector<int>& strides);

}  // namespace libreyolo::models
