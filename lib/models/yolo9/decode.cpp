#include "models/yolo9/decode.h"

#include "models/anchors.h"

#include <ATen/ATen.h>

namespace libreyolo::models {

Decoded decode_yolo9(const std::vector<at::Tensor>& maps, int reg_max, const std::vector<int>& strides) {
  std::vector<at::Tensor> boxes, scores;
  const at::Tensor bins = at::arange(reg_max, maps[0].options());
  for (std::size_t level = 0; level < maps.size(); ++level) {
    const at::Tensor& map = maps[level];
    const std::int64_t batch = map.size(0), height = map.size(2), width = map.size(3);
    const at::Tensor flat = map.flatten(2).transpose(1, 2);  // [B, HW, C]
    const at::Tensor distribution = flat.slice(2, 0, 4 * reg_max).reshape({batch, height * width, 4, reg_max});
    const at::Tensor distances = (distribution.softmax(3) * bins).sum(3);  // [B, HW, 4]: l, t, r, b
    const at::Tensor anchors = cell_grid(height, width, 0.5, map.options()).unsqueeze(0);
    const at::Tensor top_left = anchors - distances.slice(2, 0, 2);
    const at::Tensor bottom_right = anchors + distances.slice(2, 2, 4);
    boxes.push_back(at::cat({top_left, bottom_right}, 2) * strides[level]);
    scores.push_back(flat.slice(2, 4 * reg_max).sigmoid());
  }
  return {at::cat(boxes, 1), at::cat(scores, 1)};
}

}  // namespace libreyolo::models
