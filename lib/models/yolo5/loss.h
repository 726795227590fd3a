// YOLOv5's training objective as yolov5 7.0's ComputeLoss computes it: each box matched to every
// anchor whose width and height ratios stay within anchor_t, in its own cell and the two nearest
// neighbours; CIoU box loss, objectness against the match's IoU with the level balance, BCE class
// loss; the sum of the three times the batch size.
#pragma once

#include "models/loss_terms.h"
#include "models/targets.h"

#include <ATen/Tensor.h>

#include <array>
#include <vector>

namespace libreyolo::models::yolo5 {

struct LossOptions {
  // The gains as yolov5's train.py applies hyp: box x 3/nl, cls x nc/80 x 3/nl, obj x (imgsz/640)^2 x 3/nl
  // (scaled_gains); these defaults are hyp.scratch-low's for 80 classes at 640.
  double box_gain = 0.05, obj_gain = 1.0, cls_gain = 0.5;
  double anchor_t = 4.0;     // the largest ratio of a box's side to its anchor's that still matches
  double label_smoothing = 0.0;
  std::array<double, 3> balance{4.0, 1.0, 0.4};  // objectness weight of P3, P4, P5
  // Data-parallel training: yolov5's train.py multiplies each process's loss by the number of
  // processes, so that the averaged gradients are the sum a single process over the global batch
  // would take. That holds for the objectness term (a mean over every cell of every image) alone:
  // the box and class terms are means over the matches, which differ in number from rank to rank.
  // Their divisor is the global batch's match count instead (`global_normaliser`, per level), as
  // one process over the global batch divides (yolov5's own DDP uses each rank's count).
  int world_size = 1;
  GlobalNormaliser global_normaliser{};
};

// hyp's gains scaled to the number of classes and the training image size, as train.py does.
LossOptions scaled_gains(double box, double obj, double cls, int classes, int image_size);

// `maps`: per level the raw [B, anchors x (5 + nc), H, W] maps, then the anchors [levels, anchors, 2]
// in grid units (the model's output). Parts: box_loss, obj_loss, cls_loss (gains included, not
// multiplied by the batch size, as yolov5 logs them).
LossTerms loss(const std::vector<at::Tensor>& maps, const TargetBatch& targets, const LossOptions& options);

// The matches of one level, in yolov5's order (neighbour offset, anchor, box): image, anchor, cell
// (gi, gj), the box's index among the batch's valid boxes, and the target box (x, y relative to
// the cell, w, h, grid units). Exposed for the tests.
struct LevelTargets {
  at::Tensor image, anchor, gi, gj, box;  // [K] int64
  at::Tensor target;                      // [K, 4]
};
LevelTargets build_targets(const at::Tensor& boxes_grid, const at::Tensor& images, const at::Tensor& anchors, std::int64_t nx,
                           std::int64_t ny, double anchor_t);

}  // namespace libreyolo::models::yolo5
