// RTMDet's training objective as libreyolo 1.6.0 (and mmdetection) computes it: the dynamic soft
// label assigner (soft class cost + 3 (-log IoU) + 10^(centre distance / stride - 3) over the
// priors inside a box, each box taking its ⌊Σ top-13 IoU⌋ cheapest), quality focal loss (β 2)
// against the matched IoU and 2 x GIoU weighted by it, both over the sum of the matched IoUs.
// Float32 throughout.
#pragma once

#include "models/decode.h"
#include "models/loss_terms.h"
#include "models/targets.h"

#include <ATen/Tensor.h>

#include <vector>

namespace libreyolo::models::rtmdet {

struct LossOptions {
  double cls_weight = 1.0;
  double box_weight = 2.0;
  GlobalNormaliser global_normaliser{};  // the matched-IoU sum over every rank's batch
};

// The priors of `maps`' levels: [N, 3] (x, y, stride), cell corners (offset 0), row-major per level.
at::Tensor priors(const std::vector<at::Tensor>& maps);

// Boxes (x1, y1, x2, y2) [B, N, 4] and class logits [B, N, nc] of the maps ([B, 4 + nc, H, W]
// per level: distances in pixels, then logits), float32, and the priors they were decoded from.
struct Predictions {
  at::Tensor boxes, logits, priors;
};
Predictions predictions(const std::vector<at::Tensor>& maps);

struct Assignment {
  at::Tensor foreground;  // [B, N] bool
  at::Tensor gt_index;    // [B, N] int64 slot of the matched box (0 on background)
  at::Tensor iou;         // [B, N] IoU of each foreground prediction with its box (0 on background)
};
Assignment assign(const at::Tensor& boxes, const at::Tensor& logits, const at::Tensor& prior_points, const TargetBatch& targets);

// Parts: cls_loss (QFL) and bbox_loss (GIoU, gain included).
LossTerms loss(const std::vector<at::Tensor>& maps, const TargetBatch& targets, const LossOptions& options);

// The eval maps decoded for NMS: xyxy boxes and sigmoid class scores.
Decoded decode(const std::vector<at::Tensor>& maps);

}  // namespace libreyolo::models::rtmdet
