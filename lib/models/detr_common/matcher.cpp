#include "models/detr_common/matcher.h"

#include "core/error.h"
#include "models/box_ops.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <fmt/format.h>

#include <numeric>

namespace libreyolo::models::detr {

std::int64_t DetrTargets::total() const { return std::accumulate(counts.begin(), counts.end(), std::int64_t{0}); }

at::Tensor matching_cost(const at::Tensor& logits, const at::Tensor& boxes, const DetrTargets& targets,
                         const MatchCost& weights) {
  if (targets.total() != targets.classes.size(0) || targets.boxes.size(0) != targets.classes.size(0)) {
    throw RuntimeError(fmt::format("matcher: {} target classes and {} boxes, but the images' counts add up to {}",
                                   targets.classes.size(0), targets.boxes.size(0), targets.total()));
  }
  if (targets.total() == 0) return {};
  at::NoGradGuard no_grad;
  const std::int64_t images = logits.size(0), queries = logits.size(1);
  // the focal cost of calling each query each target's class: its positive term less its negative
  const at::Tensor probability = logits.flatten(0, 1).sigmoid().index_select(1, targets.classes);
  const at::Tensor negative = (1 - weights.alpha) * probability.pow(weights.gamma) * -(1 - probability + 1e-8).log();
  const at::Tensor positive = weights.alpha * (1 - probability).pow(weights.gamma) * -(probability + 1e-8).log();
  const at::Tensor class_cost = positive - negative;
  const at::Tensor query_boxes = boxes.flatten(0, 1);
  const at::Tensor l1_cost = (query_boxes.unsqueeze(1) - targets.boxes.unsqueeze(0)).abs().sum(-1);
  const double eps = weights.dfine ? 0.0 : 1e-6;
  const at::Tensor giou_cost = -generalized_iou(centre_size_to_corners(query_boxes, weights.dfine).unsqueeze(1),
                                                centre_size_to_corners(targets.boxes, weights.dfine).unsqueeze(0), eps);
  const at::Tensor cost = weights.l1_weight * l1_cost + weights.class_weight * class_cost + weights.giou_weight * giou_cost;
  return cost.view({images, queries, -1});
}

std::vector<Assignment> assign_queries(const at::Tensor& cost, const std::vector<std::int64_t>& counts) {
  std::vector<Assignment> assignments(counts.size());
  if (!cost.defined()) return assignments;
  const at::Tensor host = cost.to(at::kCPU, at::kDouble).contiguous();
  std::int64_t first = 0;
  for (std::size_t image = 0; image < counts.size(); ++image) {
    if (counts[image] > 0) {
      assignments[image] = linear_sum_assignment(host[static_cast<std::int64_t>(image)].narrow(1, first, counts[image]));
    }
    first += counts[image];
  }
  return assignments;
}

std::vector<Assignment> match(const at::Tensor& logits, const at::Tensor& boxes, const DetrTargets& targets,
                              const MatchCost& weights) {
  at::Tensor cost = matching_cost(logits, boxes, targets, weights);
  if (weights.dfine && cost.defined()) cost = cost.cpu().nan_to_num(1.0);
  return assign_queries(cost, targets.counts);
}

}  // namespace libreyolo::models::detr
