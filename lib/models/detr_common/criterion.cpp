#include "models/detr_common/criterion.h"

#include "core/step_part.h"

#include "core/error.h"
#include "models/box_ops.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <fmt/format.h>

namespace libreyolo::models::detr {

namespace {

// The matched (image, query) pairs of a level and their targets' rows in the batch's targets.
struct Matched {
  at::Tensor image, query, target;  // int64 [M]
};

Matched gather_matches(const std::vector<at::Tensor>& queries, const std::vector<at::Tensor>& local_targets,
                       const std::vector<std::int64_t>& counts) {
  std::vector<at::Tensor> images, rows;
  std::int64_t first = 0;
  for (std::size_t i = 0; i < queries.size(); ++i) {
    images.push_back(at::full_like(queries[i], static_cast<std::int64_t>(i)));
    rows.push_back(local_targets[i] + first);
    first += counts[i];
  }
  return {at::cat(images), at::cat(queries), at::cat(rows)};
}

Matched from_assignments(const std::vector<Assignment>& assignments, const std::vector<std::int64_t>& counts) {
  std::vector<at::Tensor> queries, targets;
  const auto options = at::TensorOptions().dtype(at::kLong);
  for (const auto& a : assignments) {
    queries.push_back(at::tensor(a.rows, options));
    targets.push_back(at::tensor(a.cols, options));
  }
  return gather_matches(queries, targets, counts);
}

Matched denoising_matches(const DenoisingMatch& match, const std::vector<std::int64_t>& counts) {
  if (match.positive_queries.size() != counts.size()) {
    throw RuntimeError(fmt::format("denoising: positive queries for {} images, but the batch has {}",
                                   match.positive_queries.size(), counts.size()));
  }
  std::vector<at::Tensor> targets;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    // group-major: targets 0..n-1 once per group
    targets.push_back(at::arange(counts[i], at::kLong).repeat({match.groups}));
    if (targets.back().size(0) != match.positive_queries[i].size(0)) {
      throw RuntimeError(fmt::format("denoising: image {} has {} positive queries for {} targets in {} groups", i,
                                     match.positive_queries[i].size(0), counts[i], match.groups));
    }
  }
  return gather_matches(match.positive_queries, targets, counts);
}

// Varifocal loss: every query's class scores against the one-hot of its matched target's class,
// scaled by the matched box's IoU; unmatched and other classes weighted by alpha * p^gamma.
at::Tensor varifocal_loss(const DetrLevel& level, const DetrTargets& targets, const Matched& m, const at::Tensor& normaliser,
                          const CriterionOptions& options) {
  const at::Tensor& logits = level.logits;
  const auto device = logits.device();
  const at::Tensor image = m.image.to(device), query = m.query.to(device), row = m.target.to(device);
  at::Tensor iou = at::zeros({0}, logits.options());
  if (row.size(0) > 0) {
    at::NoGradGuard no_grad;
    const at::Tensor matched_boxes = level.boxes.index({image, query});
    iou = detr_iou(centre_size_to_corners(matched_boxes), centre_size_to_corners(targets.boxes.index_select(0, row)));
  }
  at::Tensor target_classes = at::full({logits.size(0), logits.size(1)}, options.classes, at::TensorOptions().dtype(at::kLong).device(device));
  target_classes.index_put_({image, query}, targets.classes.index_select(0, row));
  const at::Tensor one_hot = at::one_hot(target_classes, options.classes + 1).narrow(-1, 0, options.classes);
  at::Tensor score = at::zeros_like(target_classes, logits.options());
  if (iou.size(0) > 0) score.index_put_({image, query}, iou.to(score.scalar_type()));
  const at::Tensor target_score = score.unsqueeze(-1) * one_hot;
  const at::Tensor weight = options.vfl_alpha * logits.sigmoid().detach().pow(options.vfl_gamma) * (1 - one_hot) + target_score;
  const at::Tensor loss = at::binary_cross_entropy_with_logits(logits, target_score, weight, {}, at::Reduction::None);
  return loss.mean(1).sum() * logits.size(1) / normaliser;
}

// L1 and 1 - GIoU of the matched queries' boxes against their targets'.
std::pair<at::Tensor, at::Tensor> box_losses(const DetrLevel& level, const DetrTargets& targets, const Matched& m,
                                             const at::Tensor& normaliser) {
  const auto device = level.boxes.device();
  const at::Tensor boxes = level.boxes.index({m.image.to(device), m.query.to(device)});
  if (boxes.size(0) == 0) return {boxes.sum() * 0, boxes.sum() * 0};
  const at::Tensor target_boxes = targets.boxes.index_select(0, m.target.to(device));
  const at::Tensor l1 = at::l1_loss(boxes, target_boxes, at::Reduction::None).sum() / normaliser;
  const at::Tensor giou = (1 - generalized_iou(centre_size_to_corners(boxes), centre_size_to_corners(target_boxes))).sum() / normaliser;
  return {l1, giou};
}

void add_level(std::vector<std::pair<std::string, at::Tensor>>& terms, const DetrLevel& level, const DetrTargets& targets,
               const Matched& matched, const at::Tensor& normaliser, const CriterionOptions& options, const std::string& suffix) {
  terms.emplace_back("loss_vfl" + suffix, varifocal_loss(level, targets, matched, normaliser, options) * options.vfl_weight);
  const auto [l1, giou] = box_losses(level, targets, matched, normaliser);
  terms.emplace_back("loss_bbox" + suffix, l1 * options.l1_weight);
  terms.emplace_back("loss_giou" + suffix, giou * options.giou_weight);
}

// The level's logits and boxes in float32 (the loss is computed in float32 under autocast too).
DetrLevel in_float(const DetrLevel& level) { return {level.logits.to(at::kFloat), level.boxes.to(at::kFloat)}; }

}  // namespace

std::vector<std::pair<std::string, at::Tensor>> detr_loss_terms(const DetrOutputs& outputs, const DetrTargets& targets,
                                                                const CriterionOptions& options,
                                                                const GlobalNormaliser& normaliser) {
  std::vector<DetrLevel> matched_levels{in_float(outputs.last)};
  for (const auto& level : outputs.auxiliary) matched_levels.push_back(in_float(level));
  const at::Tensor count = at::scalar_tensor(static_cast<double>(targets.total()),
                                             at::TensorOptions().dtype(at::kFloat).device(outputs.last.logits.device()));
  const at::Tensor boxes = loss_normaliser(count, normaliser);
  std::vector<std::pair<std::string, at::Tensor>> terms;
  for (std::size_t i = 0; i < matched_levels.size(); ++i) {
    const auto& level = matched_levels[i];
    const Matched matched = [&] {
      const StepPart part("matcher");  // a named phase in the profiler
      return from_assignments(match(level.logits, level.boxes, targets, options.match), targets.counts);
    }();
    add_level(terms, level, targets, matched, boxes, options, i == 0 ? "" : fmt::format("_aux_{}", i - 1));
  }
  if (!outputs.denoising.empty()) {
    const Matched matched = denoising_matches(outputs.denoising_match, targets.counts);
    const at::Tensor denoising_boxes = boxes * static_cast<double>(outputs.denoising_match.groups);
    for (std::size_t i = 0; i < outputs.denoising.size(); ++i) {
      add_level(terms, in_float(outputs.denoising[i]), targets, matched, denoising_boxes, options, fmt::format("_dn_{}", i));
    }
  }
  return terms;
}

LossTerms detr_loss(const DetrOutputs& outputs, const DetrTargets& targets, const CriterionOptions& options,
                    const GlobalNormaliser& normaliser) {
  const auto terms = detr_loss_terms(outputs, targets, options, normaliser);
  LossTerms result;
  at::Tensor vfl, l1, giou;
  const auto add = [](at::Tensor& sum, const at::Tensor& term) { sum = sum.defined() ? sum + term : term; };
  for (const auto& [name, value] : terms) {
    add(result.total, value);
    add(name.starts_with("loss_vfl") ? vfl : name.starts_with("loss_bbox") ? l1 : giou, value);
  }
  result.parts = {{"vfl_loss", vfl.detach()}, {"bbox_loss", l1.detach()}, {"giou_loss", giou.detach()}};
  return result;
}

}  // namespace libreyolo::models::detr
