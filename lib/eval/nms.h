// Detection post-processing: class-aware non-maximum suppression (greedy, as torchvision's nms)
// with conf, iou, max_det and the multi-label mode validation uses.
#pragma once

#include <ATen/Tensor.h>

#include <vector>

namespace libreyolo::eval {

// Greedy NMS on one image: `boxes` [N, 4] xyxy, `scores` [N]. Returns kept indices, best first.
at::Tensor nms(const at::Tensor& boxes, const at::Tensor& scores, double iou_threshold);

// Class-aware: boxes of different classes never suppress each other.
at::Tensor batched_nms(const at::Tensor& boxes, const at::Tensor& scores, const at::Tensor& classes,
                       double iou_threshold);

struct NmsOptions {
  double confidence = 0.25;
  double iou = 0.45;
  int max_detections = 300;
  bool multi_label = false;  // every class above `confidence` is a candidate (validation)
  int max_candidates = 30000;  // highest-scoring candidates kept before NMS, as Ultralytics
  // [B, 2] (width, height) of each image inside the network input, from its top-left corner; where
  // given, candidates are clipped to it and those left without area dropped before NMS, as
  // LibreYOLO's postprocess for its convolutional families does (it clips in original pixels).
  at::Tensor extents;
};

// `boxes` [B, A, 4] xyxy pixels, `class_scores` [B, A, nc] probabilities. Per image a [K, 6]
// tensor: x1, y1, x2, y2, score, class.
std::vector<at::Tensor> non_max_suppression(const at::Tensor& boxes, const at::Tensor& class_scores,
                                            const NmsOptions& options);

}  // namespace libreyolo::eval
