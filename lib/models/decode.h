// Each family's raw head maps decoded to boxes and per-class scores (before NMS).
#pragma once

#include <ATen/Tensor.h>

#include <vector>

namespace libreyolo::models {

struct Decoded {
  at::Tensor boxes;         // [B, A, 4] xyxy in input pixels
  at::Tensor class_scores;  // [B, A, nc] probabilities
};

// YOLOv9 (DDetect): per level [B, 4*reg_max + nc, H, W] raw maps; anchors at cell centres,
// distances = softmax-weighted bins x stride.
Decoded decode_yolo9(const std::vector<at::Tensor>& maps, int reg_max, const std::vector<int>& strides);

// YOLOX: per level [B, 5 + nc, H, W] eval maps (objectness and classes already sigmoid); centre
// = (raw + cell index) x stride, size = exp(raw) x stride, class score = objectness x class.
Decoded decode_yolox(const std::vector<at::Tensor>& maps, const std::vector<int>& strides);

// YOLOv5: per level [B, anchors x (5 + nc), H, W] raw maps, then the anchors [levels, anchors, 2]
// in grid units; centre = (2 sig - 0.5 + cell) x stride, size = (2 sig)^2 x anchor x stride, class
// score = objectness x class, boxes in the order (level, anchor, y, x).
Decoded decode_yolov5(const std::vector<at::Tensor>& maps, const std::vector<int>& strides);

}  // namespace libreyolo::models
