#include "models/detr_common/postprocess.h"

#include "core/error.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <algorithm>

namespace libreyolo::models::detr {

std::vector<at::Tensor> top_detections(const at::Tensor& logits, const at::Tensor& boxes,
                                       const std::vector<std::pair<double, double>>& sizes, double confidence,
                                       int max_detections, bool clamp_sizes) {
  if (static_cast<std::int64_t>(sizes.size()) != logits.size(0)) {
    throw RuntimeError(fmt::format("detections: {} image sizes for a batch of {}", sizes.size(), logits.size(0)));
  }
  std::vector<at::Tensor> out;
  const int64_t classes = logits.size(-1);
  for (int64_t b = 0; b < logits.size(0); ++b) {
    const at::Tensor scores = logits[b].sigmoid().flatten();
    const int64_t k = std::min<int64_t>(max_detections, scores.numel());
    const auto [top, index] = at::topk(scores, k);
    const at::Tensor query = at::floor_divide(index, classes), label = index.remainder(classes);
    auto parts = boxes[b].index_select(0, query).unbind(-1);  // cx, cy, w, h
    if (clamp_sizes) parts = {parts[0], parts[1], parts[2].clamp_min(0.0), parts[3].clamp_min(0.0)};
    const auto [width, height] = sizes[static_cast<std::size_t>(b)];
    const at::Tensor x1 = (parts[0] - parts[2] / 2) * width, y1 = (parts[1] - parts[3] / 2) * height;
    const at::Tensor x2 = (parts[0] + parts[2] / 2) * width, y2 = (parts[1] + parts[3] / 2) * height;
    const at::Tensor keep = top > confidence;
    out.push_back(at::stack({x1, y1, x2, y2, top, label.to(top.scalar_type())}, -1).index({keep}));
  }
  return out;
}

}  // namespace libreyolo::models::detr
