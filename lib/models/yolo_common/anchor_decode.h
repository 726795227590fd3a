// The anchor-based YOLO heads' decoder (YOLOv5's, which YOLOv7 shares): raw head maps to boxes and per-class scores (before NMS).
#pragma once

#include "models/decode.h"

#include <ATen/Tensor.h>

#include <vector>

namespace libreyolo::models {

// YOLOv5: per level [B, anchors x (5 + nc), H, W] raw maps, then the anchors [levels, anchors, 2]
// in grid units; centre = (2 sig - 0.5 + cell) x stride, size = (2 sig)^2 x anchor x stride, class
// score = objectness x class, boxes in the order (level, anchor, y, x).
Decoded decode_yolov5(const std::vector<at::Tensor>& maps, const std::vector<int>& strides);

}  // namespace libreyolo::models
