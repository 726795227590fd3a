// YOLOv9 training objective as LibreYOLO computes it: task-aligned assignment (TAL) and the
// box (CIoU), class (BCE) and distribution focal (DFL) losses. Off the CPU everything is batched
// tensor work over [B, G, A] with no host reads (a CUDA graph captures it); on the CPU the
// assignment visits each box's candidate cells and the box terms take the foreground anchors only.
#pragma once

#include "models/loss_terms.h"
#include "models/targets.h"

#include <ATen/Tensor.h>

#include <array>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace libreyolo::models::yolo9 {

struct TalOptions {
  int topk = 10;
  double iou_factor = 6.0;  // alignment metric = CIoU^iou_factor · score^cls_factor
  double cls_factor = 0.5;
  int reg_max = 16;
};

struct TalAssignment {
  at::Tensor foreground;     // [B, A] bool
  at::Tensor gt_index;       // [B, A] int64 slot of the assigned box (0 where background)
  at::Tensor target_scores;  // [B, A, nc] one-hot × normalised alignment, 0 on background
  at::Tensor target_boxes;   // [B, A, 4] xyxy pixels of the assigned box
};

// `class_logits` [B, A, nc], `boxes` [B, A, 4] predicted xyxy pixels (both treated as
// constants), `centres` [A, 2] anchor centres and `strides` [A].
// Candidates: anchor centre inside the box (distance ≥ 0) and every side within reg_max − 1.01
// strides; top-k by alignment per box; a box left without anchors takes its best-aligned one;
// an anchor claimed twice goes to the box it overlaps most (CIoU).
// On the CPU it scores only the candidate pairs (tal_assign_sparse), elsewhere every pair.
TalAssignment tal_assign(const at::Tensor& class_logits, const at::Tensor& boxes, const at::Tensor& centres,
                         const at::Tensor& strides, const TargetBatch& targets, const TalOptions& options);

// Every (box, anchor) pair as [B, G, A] tensors: static shapes, no host reads (a CUDA graph
// captures it).
TalAssignment tal_assign_dense(const at::Tensor& class_logits, const at::Tensor& boxes, const at::Tensor& centres,
                               const at::Tensor& strides, const TargetBatch& targets, const TalOptions& options);

// The same assignment from host loops over each box's candidate cells, parallel over images;
// nothing when the tensors are not on the CPU, there are no box slots, or the anchors are not
// anchor_points' grid.
std::optional<TalAssignment> tal_assign_sparse(const at::Tensor& class_logits, const at::Tensor& boxes,
                                               const at::Tensor& centres, const at::Tensor& strides,
                                               const TargetBatch& targets, const TalOptions& options);

struct LossOptions {
  double box_gain = 7.5;
  double cls_gain = 0.5;
  double dfl_gain = 1.5;
  TalOptions tal;
  GlobalNormaliser global_normaliser{};  // the target-score sum over every rank's batch
  // The assignment and the box and DFL terms over every anchor even on the CPU (elsewhere they
  // always are): static shapes and no host reads. The CPU's default scores candidate pairs and
  // takes only the foreground anchors, for the same assignment and sums.
  bool dense = false;
};

// Parts: box_loss, dfl_loss, cls_loss (gains included, as LibreYOLO logs them) and num_fg
// (foreground anchors per image).
using models::LossTerms;

// `maps`: the head's per-level raw outputs [B, 4·reg_max + nc, H, W]; strides 8/16/32.
LossTerms loss(const std::vector<at::Tensor>& maps, const TargetBatch& targets, const LossOptions& options);

}  // namespace libreyolo::models::yolo9
