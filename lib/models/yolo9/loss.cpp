#include "models/yolo9/loss.h"

#include "models/anchors.h"
#include "models/box_ops.h"
#include "models/yolo9/model.h"
#include "nn/bce_logits.h"

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

namespace {

// Expected bin of each side of `distribution` [N, 4, reg_max] times `stride` [N]: the (l, t, r, b)
// distances in pixels, and the xyxy box around `centre` [N, 2] they make.
at::Tensor decode_boxes(const at::Tensor& distribution, const at::Tensor& centre, const at::Tensor& stride) {
  const at::Tensor bins = at::arange(distribution.size(-1), distribution.options());
  const at::Tensor sides = (distribution.softmax(-1) * bins).sum(-1) * stride.unsqueeze(-1);
  return at::cat({centre - sides.narrow(-1, 0, 2), centre + sides.narrow(-1, 2, 2)}, -1);
}

struct BoxTerms {
  at::Tensor box, dfl;  // weighted sums, not yet normalised
};

// CIoU and DFL of predicted `boxes` (xyxy pixels, decoded from `distribution` [..., 4, reg_max])
// against `target_boxes`, each weighted by its score target (0 on background), in stride units;
// `centre` [..., 2] and `stride` [...] broadcast against them.
BoxTerms box_terms(const at::Tensor& distribution, const at::Tensor& boxes, const at::Tensor& centre,
                   const at::Tensor& stride, const at::Tensor& target_boxes, const at::Tensor& weight, int reg_max) {
  const at::Tensor per_anchor = stride.unsqueeze(-1);
  const at::Tensor box_units = boxes / per_anchor, target_units = target_boxes / per_anchor;
  const at::Tensor box = ((1.0 - complete_iou(box_units, target_units)) * weight).sum();
  const at::Tensor anchor_units = centre / per_anchor;
  const at::Tensor target_sides = at::cat({anchor_units - target_units.narrow(-1, 0, 2),
                                           target_units.narrow(-1, 2, 2) - anchor_units}, -1)
                                      .clamp(0, reg_max - 1.01);  // [..., 4]
  const at::Tensor left = target_sides.floor();
  const at::Tensor log_probability = distribution.log_softmax(-1);
  const at::Tensor left_term = -log_probability.gather(-1, left.to(at::kLong).unsqueeze(-1)).squeeze(-1);
  const at::Tensor right_term = -log_probability.gather(-1, (left + 1).to(at::kLong).unsqueeze(-1)).squeeze(-1);
  const at::Tensor dfl_per_side = left_term * (left + 1 - target_sides) + right_term * (target_sides - left);
  return {box, (dfl_per_side.mean(-1) * weight).sum()};
}

}  // namespace

LossTerms loss(const std::vector<at::Tensor>& maps, const TargetBatch& targets, const LossOptions& options) {
  const int reg_max = options.tal.reg_max;
  std::vector<at::Tensor> distributions, class_logits;
  for (const at::Tensor& map : maps) {
    const std::int64_t batch = map.size(0), cells = map.size(2) * map.size(3);
    const at::Tensor flat = map.flatten(2).transpose(1, 2);  // [B, HW, C]
    // one split, not two narrows: its backward writes both parts' gradients into one map (each
    // narrow's would fill a zero map of its own, then the two would be added)
    const auto parts = flat.split_with_sizes({4 * reg_max, flat.size(2) - 4 * reg_max}, 2);
    distributions.push_back(parts[0].reshape({batch, cells, 4, reg_max}));
    class_logits.push_back(parts[1]);
  }
  const at::Tensor distribution = at::cat(distributions, 1).to(at::kFloat);  // [B, A, 4, reg_max]
  const at::Tensor logits = at::cat(class_logits, 1).to(at::kFloat);         // [B, A, nc]
  const std::int64_t batch = logits.size(0);
  const std::vector<int> strides(ModelImpl::kStrides.begin(), ModelImpl::kStrides.end());
  const AnchorPoints points = anchor_points(maps, strides);
  // On the CPU the box and DFL terms take only the foreground anchors (the others weigh 0: the
  // same sums, without the softmax, log-softmax and CIoU work and their backward over every anchor);
  // elsewhere, or with options.dense, every anchor: static shapes, no host reads (a CUDA graph
  // captures it).
  const bool foreground_only = !options.dense && distribution.device().is_cpu();
  const at::Tensor centres = points.centres.unsqueeze(0), anchor_strides = points.strides.unsqueeze(0);

  // Predicted boxes [B, A, 4]: only for the assignment (a constant there) when the loss decodes
  // the foreground anchors' own.
  const at::Tensor boxes = decode_boxes(foreground_only ? distribution.detach() : distribution, centres, anchor_strides);
  const TalAssignment assigned = options.dense ? tal_assign_dense(logits, boxes, points.centres, points.strides, targets, options.tal)
                                               : tal_assign(logits, boxes, points.centres, points.strides, targets, options.tal);
  const at::Tensor norm = loss_normaliser(assigned.target_scores.sum(), options.global_normaliser);

  const at::Tensor cls = nn::bce_with_logits_sum(logits, assigned.target_scores) / norm;
  const at::Tensor weight = assigned.target_scores.sum(-1);  // [B, A], 0 on background
  BoxTerms terms;
  if (foreground_only) {
    const at::Tensor rows = assigned.foreground.flatten().nonzero().squeeze(1);  // image · A + anchor
    const at::Tensor anchor = rows.remainder(points.strides.size(0));
    const auto pick = [&](const at::Tensor& t) { return t.flatten(0, 1).index_select(0, rows); };
    const at::Tensor picked = pick(distribution), centre = points.centres.index_select(0, anchor);
    const at::Tensor stride = points.strides.index_select(0, anchor);
    terms = box_terms(picked, decode_boxes(picked, centre, stride), centre, stride, pick(assigned.target_boxes),
                      pick(weight), reg_max);
  } else {
    terms = box_terms(distribution, boxes, centres, anchor_strides, assigned.target_boxes, weight, reg_max);
  }
  const at::Tensor box = terms.box / norm, dfl = terms.dfl / norm;

  const at::Tensor box_loss = box * options.box_gain, dfl_loss = dfl * options.dfl_gain, cls_loss = cls * options.cls_gain;
  const double images = std::max<std::int64_t>(batch, 1);
  return {box_loss + dfl_loss + cls_loss,
          {{"box_loss", box_loss.detach()},
           {"dfl_loss", dfl_loss.detach()},
           {"cls_loss", cls_loss.detach()},
           {"num_fg", assigned.foreground.sum().to(at::kFloat) / images}}};
}

}  // namespace libreyolo::models::yolo9
