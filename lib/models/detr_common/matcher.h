// The Hungarian matcher of the encoder-decoder detectors (RT-DETR, D-FINE, DEIM): a cost for every
// (query, target) pair of an image, from the query's class score and box, then the assignment of
// least total cost per image (linear_assignment.h). Each target gets one query; the other queries
// are background.
#pragma once

#include "models/detr_common/linear_assignment.h"

#include <ATen/Tensor.h>

#include <cstdint>
#include <vector>

namespace libreyolo::models::detr {

// cost = class · focal class cost + l1 · L1 distance + giou · (-GIoU), the references' weights
// (2, 5, 2); the focal class cost with alpha 0.25 and gamma 2.
struct MatchCost {
  double class_weight = 2.0;
  double l1_weight = 5.0;
  double giou_weight = 2.0;
  double alpha = 0.25;
  double gamma = 2.0;
  // D-FINE's and DEIM's form: boxes with negative sizes read as empty, no epsilon in the GIoU, and a
  // NaN cost read as 1.0 before the assignment
  bool dfine = false;
};

// A batch's targets, concatenated in image order: `classes` [T] int64, `boxes` [T, 4] (cx, cy, w,
// h) normalised to the image, on the predictions' device; `counts[b]` of them belong to image b
// (host values, so splitting them syncs nothing).
struct DetrTargets {
  at::Tensor classes;
  at::Tensor boxes;
  std::vector<std::int64_t> counts;

  std::int64_t total() const;
};

// The [B, Q, T] cost of every query of every image against every target of the batch, on the
// predictions' device (one matrix for the batch: one transfer to the host). `logits` [B, Q, C] are
// the class scores before the sigmoid, `boxes` [B, Q, 4] normalised (cx, cy, w, h). Undefined when
// the batch has no target.
at::Tensor matching_cost(const at::Tensor& logits, const at::Tensor& boxes, const DetrTargets& targets,
                         const MatchCost& weights = {});

// Per image, the assignment of its queries (rows) to its own targets (columns counted from the
// image's first target), from the [B, Q, T] cost: SciPy's pairs, sorted by query. An image without
// targets gets none.
std::vector<Assignment> assign_queries(const at::Tensor& cost, const std::vector<std::int64_t>& counts);

// matching_cost, moved to the CPU in float64's reading of it, then assign_queries.
std::vector<Assignment> match(const at::Tensor& logits, const at::Tensor& boxes, const DetrTargets& targets,
                              const MatchCost& weights = {});

}  // namespace libreyolo::models::detr
