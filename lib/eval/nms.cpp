#include "eval/nms.h"

#include <ATen/ATen.h>

#include <algorithm>

namespace libreyolo::eval {

at::Tensor nms(const at::Tensor& boxes_in, const at::Tensor& scores_in, double iou_threshold) {
  const at::Tensor boxes = boxes_in.to(at::kFloat).contiguous();
  // Stable: equal scores keep their input order, so the result never depends on the sort's whims.
  const at::Tensor order =
      std::get<1>(scores_in.to(at::kFloat).sort(/*stable=*/true, /*dim=*/0, /*descending=*/true)).contiguous();
  const std::int64_t count = boxes.size(0);
  const float* b = boxes.data_ptr<float>();
  const std::int64_t* sorted = order.data_ptr<std::int64_t>();
  std::vector<float> areas(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) {
    areas[i] = std::max(0.f, b[4 * i + 2] - b[4 * i]) * std::max(0.f, b[4 * i + 3] - b[4 * i + 1]);
  }
  std::vector<char> suppressed(static_cast<std::size_t>(count), 0);
  std::vector<std::int64_t> keep;
  for (std::int64_t n = 0; n < count; ++n) {
    const std::int64_t i = sorted[n];
    if (suppressed[i]) continue;
    keep.push_back(i);
    for (std::int64_t m = n + 1; m < count; ++m) {
      const std::int64_t j = sorted[m];
      if (suppressed[j]) continue;
      const float width = std::min(b[4 * i + 2], b[4 * j + 2]) - std::max(b[4 * i], b[4 * j]);
      const float height = std::min(b[4 * i + 3], b[4 * j + 3]) - std::max(b[4 * i + 1], b[4 * j + 1]);
      if (width <= 0 || height <= 0) continue;
      const float intersection = width * height;
      if (intersection / (areas[i] + areas[j] - intersection) > iou_threshold) suppressed[j] = 1;
    }
  }
  return at::tensor(keep, at::kLong);
}

at::Tensor batched_nms(const at::Tensor& boxes, const at::Tensor& scores, const at::Tensor& classes, double iou_threshold) {
  if (boxes.size(0) == 0) return at::empty({0}, at::kLong);
  // offset each class far apart so boxes of different classes never overlap (torchvision's trick)
  const at::Tensor offsets = classes.to(boxes.scalar_type()) * (boxes.max() + 1);
  return nms(boxes + offsets.unsqueeze(1), scores, iou_threshold);
}

std::vector<at::Tensor> non_max_suppression(const at::Tensor& boxes, const at::Tensor& class_scores,
                                            const NmsOptions& options) {
  std::vector<at::Tensor> results;
  for (std::int64_t image = 0; image < boxes.size(0); ++image) {
    const at::Tensor image_boxes = boxes[image];
    const at::Tensor scores = class_scores[image];
    at::Tensor candidate_boxes, candidate_scores, candidate_classes;
    if (options.multi_label) {
      const at::Tensor above = (scores > options.confidence).nonzero();  // [K, 2]: anchor, class
      const at::Tensor anchors = above.select(1, 0);
      candidate_classes = above.select(1, 1);
      candidate_boxes = image_boxes.index_select(0, anchors);
      candidate_scores = scores.index({anchors, candidate_classes});
    } else {
      const auto [best, best_class] = scores.max(1);
      const at::Tensor keep = (best > options.confidence).nonzero().squeeze(1);
      candidate_boxes = image_boxes.index_select(0, keep);
      candidate_scores = best.index_select(0, keep);
      candidate_classes = best_class.index_select(0, keep);
    }
    if (options.extents.defined()) {
      const double width = options.extents[image][0].item<double>(), height = options.extents[image][1].item<double>();
      const at::Tensor x = candidate_boxes.narrow(1, 0, 1).clamp(0, width), y = candidate_boxes.narrow(1, 1, 1).clamp(0, height);
      const at::Tensor x2 = candidate_boxes.narrow(1, 2, 1).clamp(0, width), y2 = candidate_boxes.narrow(1, 3, 1).clamp(0, height);
      candidate_boxes = at::cat({x, y, x2, y2}, 1);
      const at::Tensor with_area = ((x2 > x) & (y2 > y)).squeeze(1).nonzero().squeeze(1);
      candidate_boxes = candidate_boxes.index_select(0, with_area);
      candidate_scores = candidate_scores.index_select(0, with_area);
      candidate_classes = candidate_classes.index_select(0, with_area);
    }
    if (candidate_scores.size(0) > options.max_candidates) {
      const at::Tensor top = std::get<1>(candidate_scores.topk(options.max_candidates));
      candidate_boxes = candidate_boxes.index_select(0, top);
      candidate_scores = candidate_scores.index_select(0, top);
      candidate_classes = candidate_classes.index_select(0, top);
    }
    at::Tensor kept = batched_nms(candidate_boxes, candidate_scores, candidate_classes, options.iou);
    if (kept.size(0) > options.max_detections) kept = kept.slice(0, 0, options.max_detections);
    results.push_back(at::cat({candidate_boxes.index_select(0, kept), candidate_scores.index_select(0, kept).unsqueeze(1),
                               candidate_classes.index_select(0, kept).to(candidate_boxes.scalar_type()).unsqueeze(1)},
                              1));
  }
  return results;
}

}  // namespace libreyolo::eval
