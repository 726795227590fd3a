#include "models/yolox/decode.h"

#include "models/anchors.h"

#include <ATen/ATen.h>

namespace libreyolo::models {

Decoded decode_yolox(const std::vector<at::Tensor>& maps, const std::vector<int>& strides) {
  std::vector<at::Tensor> boxes, scores;
  for (std::size_t level = 0; level < maps.size(); ++level) {
    const at::Tensor& map = maps[level];
    const std::int64_t height = map.size(2), width = map.size(3);
    const at::Tensor flat = map.flatten(2).transpose(1, 2);  // [B, HW, 5 + nc]
    const at::Tensor cells = cell_grid(height, width, 0.0, map.options()).unsqueeze(0);
    const double stride = strides[level];
    const at::Tensor centre = (flat.slice(2, 0, 2) + cells) * stride;
    const at::Tensor size = flat.slice(2, 2, 4).exp() * stride;
    boxes.push_back(at::cat({centre - size / 2, centre + size / 2}, 2));
    scores.push_back(flat.slice(2, 5) * flat.slice(2, 4, 5));
  }
  return {at::cat(boxes, 1), at::cat(scores, 1)};
}

}  // namespace libreyolo::models
