// YOLOv7-b's training objective as libreyolo 1.6.0 computes it: the anchor head decoded into
// boxes (each of a cell's three anchors a separate prediction), then YOLOX's SimOTA and its IoU
// (x5), objectness and soft-class terms, in float32, never an L1 term.
#pragma once

#include "models/loss_terms.h"
#include "models/targets.h"

#include <ATen/Tensor.h>

#include <vector>

namespace libreyolo::models::yolo7 {

struct LossOptions {
  GlobalNormaliser global_normaliser{};  // num_fg over every rank's batch
};

// `maps`: per level [B, 3 (5 + nc), H, W], strides 8/16/32. Parts: iou_loss (gain 5 included),
// obj_loss, cls_loss, num_fg (per ground-truth box).
LossTerms loss(const std::vector<at::Tensor>& maps, const TargetBatch& targets, const LossOptions& options);

// SimOTA's assignment of the same predictions: [B, N] the matched box's slot + 1, 0 for background.
at::Tensor assign(const std::vector<at::Tensor>& maps, const TargetBatch& targets);

}  // namespace libreyolo::models::yolo7
