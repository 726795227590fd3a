// YOLOX's decoder: raw head maps to boxes and per-class scores (before NMS).
#pragma once

#include "models/decode.h"

#include <ATen/Tensor.h>

#include <vector>

namespace libreyolo::models {

// YOLOX: per level [B, 5 + nc, H, W] eval maps (objectness and classes already sigmoid); centre
// = (raw + cell index) x stride, size = exp(raw) x stride, class score = objectness x class.
Decoded decode_yolox(const std::vector<at::Tensor>& maps, const std::vector<int>& strides);

}  // namespace libreyolo::models
