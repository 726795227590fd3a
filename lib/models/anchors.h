// Anchor points of the three detection levels, shared by decoding and both assigners: one per
// feature-map cell, ordered level by level and row-major inside a level (as the heads flatten).
#pragma once

#include <ATen/Tensor.h>

#include <cstdint>
#include <vector>

namespace libreyolo::models {

// [H*W, 2] cell coordinates (x, y) of one level, plus `offset` (0.5 for cell centres).
at::Tensor cell_grid(std::int64_t height, std::int64_t width, double offset, const at::TensorOptions& options);

struct AnchorPoints {
  at::Tensor cells;    // [A, 2] integer cell (x, y) as float
  at::Tensor centres;  // [A, 2] cell centres in input pixels: (cell + 0.5) x stride
  at::Tensor strides;  // [A] stride of each anchor's level
};

// From the per-level maps' spatial sizes (maps[level].size(2), .size(3)).
AnchorPoints anchor_points(const std::vector<at::Tensor>& maps, const std::vector<int>& strides);

}  // namespace libreyolo::models
