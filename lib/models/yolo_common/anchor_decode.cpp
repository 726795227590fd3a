#include "models/yolo_common/anchor_decode.h"

#include "models/anchors.h"

#include <ATen/ATen.h>

namespace libreyolo::models {

Decoded decode_yolov5(const std::vector<at::Tensor>& maps, const std::vector<int>& strides) {
  std::vector<at::Tensor> boxes, scores;
  const at::Tensor& grid_anchors = maps.back();  // [levels, anchors, 2], grid units
  const std::int64_t anchors = grid_anchors.size(1);
  for (std::size_t level = 0; level + 1 < maps.size(); ++level) {
    const at::Tensor& map = maps[level];
    const std::int64_t batch = map.size(0), height = map.size(2), width = map.size(3);
    const std::int64_t outputs = map.size(1) / anchors;
    // [B, anchors x outputs, H, W] -> [B, anchors x H x W, outputs], yolov5's order (anchor, y, x)
    const at::Tensor flat =
        map.view({batch, anchors, outputs, height, width}).permute({0, 1, 3, 4, 2}).reshape({batch, -1, outputs}).sigmoid();
    const at::Tensor cells = cell_grid(height, width, 0.0, map.options()).repeat({anchors, 1}).unsqueeze(0);
    const double stride = strides[level];
    const at::Tensor pixels =
        (grid_anchors[static_cast<std::int64_t>(level)].to(map.options()) * stride).repeat_interleave(height * width, 0).unsqueeze(0);
    const at::Tensor centre = (flat.slice(2, 0, 2) * 2 - 0.5 + cells) * stride;
    const at::Tensor size = (flat.slice(2, 2, 4) * 2).pow(2) * pixels;
    boxes.push_back(at::cat({centre - size / 2, centre + size / 2}, 2));
    scores.push_back(flat.slice(2, 5) * flat.slice(2, 4, 5));
  }
  return {at::cat(boxes, 1), at::cat(scores, 1)};
}

}  // namespace libreyolo::models
