// SimOTA, the assignment and loss YOLOX trains with and YOLOv7 (LibreYOLO's) shares: the IoU (x5),
// objectness, soft-class and optional L1 losses. Batched over [B, G, A] with no host loop over
// boxes and no value read back.
#pragma once

#include "models/loss_terms.h"
#include "models/targets.h"

#include <ATen/Tensor.h>

#include <string>
#include <utility>
#include <vector>

namespace libreyolo::models::yolo_common {

enum class SimOtaVariant {
  Current,  // centre prior only: anchor centre within 1.5 strides of the box centre (YOLOX ≥ Jan 2023)
  Original  // in-box OR within 2.5 strides; cost penalty 1e5 unless both (YOLOX ≤ 0.3.0, the paper)
};

struct SimOtaAssignment {
  at::Tensor foreground;  // [B, A] bool
  at::Tensor gt_index;    // [B, A] int64 slot of the assigned box (0 where background)
  at::Tensor iou;         // [B, A] IoU of each foreground prediction with its box (0 on background)
};

// `class_logits` [B, A, nc], `objectness_logits` [B, A], `boxes` [B, A, 4] decoded (cx, cy, w, h)
// pixels, `cells` [A, 2] integer cell coordinates and `strides` [A]. Cost = BCE(√(σcls·σobj),
// one-hot) + 3·(−log(IoU + 1e-8)) + penalty outside the prior; each box takes its dynamic_k =
// max(1, ⌊Σ top-10 IoU⌋) cheapest candidates; an anchor claimed twice keeps the cheapest box.
// On the CPU the costs are taken per image over the anchors some box of it may take (the same
// result: the others have IoU 0 and infinite cost); `dense`: over every anchor, as on a GPU.
SimOtaAssignment simota_assign(const at::Tensor& class_logits, const at::Tensor& objectness_logits,
                               const at::Tensor& boxes, const at::Tensor& cells, const at::Tensor& strides,
                               const TargetBatch& targets, SimOtaVariant variant = SimOtaVariant::Current,
                               bool dense = false);

struct SimOtaLossOptions {
  bool use_l1 = false;  // switched on with the no-augmentation epochs
  double iou_gain = 5.0;
  SimOtaVariant variant = SimOtaVariant::Current;
  GlobalNormaliser global_normaliser{};  // num_fg over every rank's batch (YOLOX all-reduces it)
};

// Parts: iou_loss (gain included), obj_loss, cls_loss, l1_loss and num_fg (per ground-truth
// box), as LibreYOLO logs them.
// Decoded predictions for the SimOTA loss, float32: `boxes` [B, A, 4] (cx, cy, w, h) pixels,
// `objectness` [B, A] and `class_logits` [B, A, nc] logits, `cells` [A, 2] and `strides` [A] of
// each prediction's cell (YOLOv7's three anchors of a cell share its cell and stride).
struct SimOtaPredictions {
  at::Tensor boxes, objectness, class_logits, cells, strides;
};

// YOLOX's loss (yolox/loss.h) from decoded predictions; `raw_box` [B, A, 4] (YOLOX's raw offsets and
// log sizes) only where options.use_l1.
LossTerms simota_loss(const SimOtaPredictions& predictions, const TargetBatch& targets, const SimOtaLossOptions& options,
                      const at::Tensor& raw_box = {});

}  // namespace libreyolo::models::yolo_common
