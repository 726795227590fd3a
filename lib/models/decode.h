// What a family's decoder makes of its raw head maps: boxes and per-class scores (before NMS).
// Each family's decoder lives in its folder (yolo9/decode.h, ...).
#pragma once

#include <ATen/Tensor.h>

#include <vector>

namespace libreyolo::models {

struct Decoded {
  at::Tensor boxes;         // [B, A, 4] xyxy in input pixels
  at::Tensor class_scores;  // [B, A, nc] probabilities
};

}  // namespace libreyolo::models
