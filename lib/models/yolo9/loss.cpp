#include "models/yolo9/loss.h"

#include "models/anchors.h"
#include "models/box_ops.h"
#include "models/yolo9/model.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>


namespace libreyolo::models::yolo9 {

TalAssignment tal_assign(const at::Tensor& class_logits, const at::Tensor& boxes, const at::Tensor& centres,
                         const at::Tensor& strides, const TargetBatch& targets, const TalOptions& options) {
  if (auto sparse = tal_assign_sparse(class_logits, boxes, centres, strides, targets, options)) return *sparse;
  return tal_assign_dense(class_logits, boxes, centres, strides, targets, options);
}

TalAssignment tal_assign_dense(const at::Tensor& class_logits_in, const at::Tensor& boxes_in, const at::Tensor& centres,
                               const at::Tensor& strides, const TargetBatch& targets, const TalOptions& options) {
  at::NoGradGuard no_grad;
  const at::Tensor class_logits = class_logits_in.detach().to(at::kFloat);
  const at::Tensor boxes = boxes_in.detach().to(at::kFloat);
  const std::int64_t batch = class_logits.size(0), anchors = class_logits.size(1), classes = class_logits.size(2);
  const std::int64_t slots = targets.slots();
  if (slots == 0) {
    return {at::zeros({batch, anchors}, boxes.options().dtype(at::kBool)),
            at::zeros({batch, anchors}, boxes.options().dtype(at::kLong)), at::zeros_like(class_logits),
            at::zeros_like(boxes)};
  }
  const at::Tensor gt_boxes = targets.boxes_xyxy.to(at::kFloat);                    // [B, G, 4]
  const at::Tensor valid = targets.valid.unsqueeze(-1);                               // [B, G, 1]

  // Candidate anchors: distances to the four sides, in strides, all ≥ 0 and ≤ reg_max − 1.01.
  const at::Tensor x = centres.select(1, 0).view({1, 1, anchors}), y = centres.select(1, 1).view({1, 1, anchors});
  const auto side = [&](int i) { return gt_boxes.select(2, i).unsqueeze(-1); };  // [B, G, 1]
  const at::Tensor distances = at::stack({x - side(0), y - side(1), side(2) - x, side(3) - y}, -1) /
                               strides.view({1, 1, anchors, 1});
  const at::Tensor candidate = (distances.amin(-1) >= 0) & (distances.amax(-1) <= options.reg_max - 1.01) & valid;

  // Alignment metric over every (box, anchor) pair.
  const at::Tensor iou = complete_iou(gt_boxes.unsqueeze(2), boxes.unsqueeze(1)).clamp(0, 1) * valid;  // [B, G, A]
  const at::Tensor score = class_logits.sigmoid().transpose(1, 2)
                               .gather(1, targets.classes.unsqueeze(-1).expand({batch, slots, anchors}));
  const at::Tensor metric = iou.pow(options.iou_factor) * score.pow(options.cls_factor);

  // Top-k candidates per box (a zero metric never counts as chosen).
  const std::int64_t k = std::min<std::int64_t>(options.topk, anchors);
  const auto [top_values, top_indices] = (metric * candidate).topk(k, -1);
  at::Tensor chosen = at::zeros_like(metric).scatter_(-1, top_indices, top_values) > 0;
  // A box left without anchors takes its best-aligned anchor, candidate or not.
  const auto [best_value, best_anchor] = metric.max(-1);
  const at::Tensor best_only = at::zeros_like(chosen).scatter_(-1, best_anchor.unsqueeze(-1), true);
  const at::Tensor orphan = (chosen.sum(-1) == 0) & (best_value > 0);
  chosen = at::where(orphan.unsqueeze(-1), best_only, chosen);
  // An anchor claimed by several boxes keeps the one it overlaps most.
  const at::Tensor claimed_twice = chosen.sum(1, /*keepdim=*/true) > 1;
  const at::Tensor best_box = (iou * chosen).argmax(1, /*keepdim=*/true);
  const at::Tensor best_box_only = at::zeros_like(chosen).scatter_(1, best_box, true);
  chosen = at::where(claimed_twice, best_box_only, chosen);

  const at::Tensor gt_index = chosen.to(at::kByte).argmax(1);  // [B, A]
  const at::Tensor foreground = chosen.any(1);
  const at::Tensor target_boxes = gt_boxes.gather(1, gt_index.unsqueeze(-1).expand({batch, anchors, 4}));
  const at::Tensor target_class = targets.classes.gather(1, gt_index);

  // Score target: alignment normalised per box to that box's best IoU among its anchors.
  const at::Tensor kept_metric = metric * chosen, kept_iou = iou * chosen;
  const at::Tensor normalised = kept_metric / (kept_metric.amax(-1, true) + 1e-9) * kept_iou.amax(-1, true);
  const at::Tensor anchor_score = normalised.gather(1, gt_index.unsqueeze(1)).squeeze(1) * foreground;  // [B, A]
  const at::Tensor target_scores =
      at::zeros({batch, anchors, classes}, class_logits.options()).scatter_(-1, target_class.unsqueeze(-1), 1.0) *
      anchor_score.unsqueeze(-1);
  return {foreground, gt_index, target_scores, target_boxes};
}

LossTerms loss(const std::vector<at::Tensor>& maps, const TargetBatch& targets, const LossOptions& options) {
  const int reg_max = options.tal.reg_max;
  std::vector<at::Tensor> distributions, class_logits;
  for (const at::Tensor& map : maps) {
    const std::int64_t batch = map.size(0), cells = map.size(2) * map.size(3);
    const at::Tensor flat = map.flatten(2).transpose(1, 2);  // [B, HW, C]
    distributions.push_back(flat.narrow(2, 0, 4 * reg_max).reshape({batch, cells, 4, reg_max}));
    class_logits.push_back(flat.narrow(2, 4 * reg_max, flat.size(2) - 4 * reg_max));
  }
  const at::Tensor distribution = at::cat(distributions, 1).to(at::kFloat);  // [B, A, 4, reg_max]
  const at::Tensor logits = at::cat(class_logits, 1).to(at::kFloat);         // [B, A, nc]
  const std::vector<int> strides(ModelImpl::kStrides.begin(), ModelImpl::kStrides.end());
  const AnchorPoints points = anchor_points(maps, strides);
  const at::Tensor stride = points.strides.view({1, -1, 1});

  // Decoded boxes: expected bin of each side, in strides (sides l, t, r, b).
  const at::Tensor bins = at::arange(reg_max, distribution.options());
  const at::Tensor sides = (distribution.softmax(3) * bins).sum(3) * stride;
  const at::Tensor centres = points.centres.unsqueeze(0);
  const at::Tensor boxes = at::cat({centres - sides.narrow(2, 0, 2), centres + sides.narrow(2, 2, 2)}, 2);

  const TalAssignment assigned =
      tal_assign(logits, boxes, points.centres, points.strides, targets, options.tal);
  const at::Tensor weight = assigned.target_scores.sum(-1);  // [B, A], 0 on background
  const at::Tensor norm = loss_normaliser(assigned.target_scores.sum(), options.global_normaliser);

  const at::Tensor cls = at::binary_cross_entropy_with_logits(logits, assigned.target_scores, {}, {},
                                                              at::Reduction::None).sum() / norm;
  // Box and DFL terms over every anchor, weighted by the (zero on background) score target, in
  // stride units.
  const at::Tensor box_units = boxes / stride, target_units = assigned.target_boxes / stride;
  const at::Tensor box = ((1.0 - complete_iou(box_units, target_units)) * weight).sum() / norm;
  const at::Tensor anchor_units = (points.centres / points.strides.unsqueeze(-1)).unsqueeze(0);
  const at::Tensor target_sides = at::cat({anchor_units - target_units.narrow(2, 0, 2),
                                           target_units.narrow(2, 2, 2) - anchor_units}, 2)
                                      .clamp(0, reg_max - 1.01);  // [B, A, 4]
  const at::Tensor left = target_sides.floor();
  const at::Tensor log_probability = distribution.log_softmax(3);
  const at::Tensor left_term = -log_probability.gather(3, left.to(at::kLong).unsqueeze(-1)).squeeze(-1);
  const at::Tensor right_term = -log_probability.gather(3, (left + 1).to(at::kLong).unsqueeze(-1)).squeeze(-1);
  const at::Tensor dfl_per_side = left_term * (left + 1 - target_sides) + right_term * (target_sides - left);
  const at::Tensor dfl = (dfl_per_side.mean(-1) * weight).sum() / norm;

  const at::Tensor box_loss = box * options.box_gain, dfl_loss = dfl * options.dfl_gain, cls_loss = cls * options.cls_gain;
  const double images = std::max<std::int64_t>(logits.size(0), 1);
  return {box_loss + dfl_loss + cls_loss,
          {{"box_loss", box_loss.detach()},
           {"dfl_loss", dfl_loss.detach()},
           {"cls_loss", cls_loss.detach()},
           {"num_fg", assigned.foreground.sum().to(at::kFloat) / images}}};
}

}  // namespace libreyolo::models::yolo9
