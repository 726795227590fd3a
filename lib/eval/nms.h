// Detection post-processing: decode each family's raw head maps to boxes and scores, then
// class-aware non-maximum suppression (greedy, as torchvision's nms) with conf, iou, max_det
// and the multi-label mode validation uses.
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
};

// `boxes` [B, A, 4] xyxy pixels, `class_scores` [B, A, nc] probabilities. Per image a [K, 6]
// tensor: x1, y1, x2, y2, score, class.
std::vector<at::Tensor> non_max_suppression(const at::Tensor& boxes, const at::Tensor& class_scores,
                                            const NmsOptions& options);

struct Decoded {
  at::Tensor boxes;         // [B, A, 4] xyxy in input pixels
  at::Tensor class_scores;  // [B, A, nc] probabilities
};

// YOLOv9 (DDetect): per level [B, 4*reg_max + nc, H, W] raw maps; anchors at cell centres,
// distances = softmax-weighted bins x stride.
Decoded decode_yolo9(const std::vector<at::Tensor>& maps, int reg_max, const std::vector<int>& strides);

// YOLOX: per level [B, 5 + nc, H, W] eval maps (objectness and classes already sigmoid); centre
// = (raw + cell index) x stride, size = exp(raw) x stride, class score = objectness x class.
Decoded decode_yolox(const std::vector<at::Tensor>& maps, const std::vector<int>& strides);

}  // namespace libreyolo::eval
