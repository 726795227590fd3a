#include "models/anchors.h"

#include <ATen/ATen.h>

namespace libreyolo::models {

at::Tensor cell_grid(std::int64_t height, std::int64_t width, double offset, const at::TensorOptions& options) {
  const at::Tensor ys = at::arange(height, options).add(offset);
  const at::Tensor xs = at::arange(width, options).add(offset);
  const auto mesh = at::meshgrid({ys, xs}, "ij");
  return at::stack({mesh[1], mesh[0]}, -1).reshape({-1, 2});
}

AnchorPoints anchor_points(const std::vector<at::Tensor>& maps, const std::vector<int>& strides) {
  std::vector<at::Tensor> cells, centres, level_strides;
  for (std::size_t level = 0; level < maps.size(); ++level) {
    const auto options = maps[level].options().dtype(at::kFloat);
    const at::Tensor grid = cell_grid(maps[level].size(2), maps[level].size(3), 0.0, options);
    cells.push_back(grid);
    centres.push_back((grid + 0.5) * strides[level]);
    level_strides.push_back(at::full({grid.size(0)}, static_cast<double>(strides[level]), options));
  }
  return {at::cat(cells), at::cat(centres), at::cat(level_strides)};
}

}  // namespace libreyolo::models
