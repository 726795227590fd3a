#include "models/yolo_common/simota.h"

#include "models/anchors.h"
#include "models/box_ops.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <limits>

namespace libreyolo::models::yolo_common {

namespace {

// -max(log(p), -100): the clamped log binary cross-entropy uses.
at::Tensor negative_log(const at::Tensor& p) { return -p.log().clamp_min(-100.0); }

// Costs, dynamic k and matching over the anchors given (all of them, or one image's candidates).
SimOtaAssignment match(const at::Tensor& class_logits, const at::Tensor& objectness_logits, const at::Tensor& boxes,
                       const at::Tensor& gt, const at::Tensor& classes, const at::Tensor& valid, const at::Tensor& geometry,
                       const at::Tensor& candidate, bool original) {
  const std::int64_t batch = class_logits.size(0), anchors = class_logits.size(1), slots = gt.size(1);
  // Costs over (box, anchor).
  // [B, G, A]; selected, not multiplied: an empty slot's zero box against a prediction collapsed to
  // zero area is 0/0, and NaN x 0 would reach the matched IoU (LibreYOLO never pairs them: it
  // assigns each image's real boxes only).
  const at::Tensor iou =
      at::where(candidate & valid, centre_size_iou(gt.unsqueeze(2), boxes.unsqueeze(1)), at::zeros({}, boxes.options()));
  const at::Tensor p = (class_logits.sigmoid() * objectness_logits.sigmoid().unsqueeze(-1)).sqrt();  // [B, A, nc]
  const at::Tensor all_negative = negative_log(1 - p).sum(-1).unsqueeze(1);                        // [B, 1, A]
  const at::Tensor p_of_class =
      p.transpose(1, 2).gather(1, classes.unsqueeze(-1).expand({batch, slots, anchors}));  // [B, G, A]
  const at::Tensor class_cost = all_negative - negative_log(1 - p_of_class) + negative_log(p_of_class);
  const at::Tensor penalty = (~geometry).to(at::kFloat) * (original ? 100000.0 : 1e6);
  at::Tensor cost = class_cost + 3.0 * -(iou + 1e-8).log() + penalty;
  cost = cost.masked_fill(~(candidate & valid), std::numeric_limits<float>::infinity());

  // Dynamic k: the summed ten best IoUs of each box, at least 1.
  constexpr std::int64_t kCandidates = 10;
  const std::int64_t k = std::min(kCandidates, anchors);
  const at::Tensor dynamic_k = std::get<0>(iou.topk(k, -1)).sum(-1).to(at::kInt).clamp_min(1);  // [B, G]
  const at::Tensor cheapest = std::get<1>(cost.topk(k, -1, /*largest=*/false));                  // [B, G, k]
  const at::Tensor rank_taken = at::arange(k, dynamic_k.options()).view({1, 1, k}) < dynamic_k.unsqueeze(-1);
  at::Tensor matched = at::zeros_like(cost, cost.options().dtype(at::kBool)).scatter_(-1, cheapest, rank_taken);
  matched = matched & (candidate & valid);
  // An anchor claimed by several boxes keeps the cheapest of all boxes.
  const at::Tensor claimed_twice = matched.sum(1, /*keepdim=*/true) > 1;
  const at::Tensor cheapest_box =
      at::zeros_like(matched).scatter_(1, cost.argmin(1, /*keepdim=*/true), true);
  matched = at::where(claimed_twice, cheapest_box, matched);

  const at::Tensor foreground = matched.any(1);
  const at::Tensor gt_index = matched.to(at::kByte).argmax(1);
  const at::Tensor matched_iou = (iou * matched).sum(1);
  return {foreground, gt_index, matched_iou};
}

}  // namespace

SimOtaAssignment simota_assign(const at::Tensor& class_logits_in, const at::Tensor& objectness_logits_in,
                               const at::Tensor& boxes_in, const at::Tensor& cells, const at::Tensor& strides,
                               const TargetBatch& targets, SimOtaVariant variant, bool dense) {
  at::NoGradGuard no_grad;
  // fp32 whatever the autocast dtype of the forward pass.
  const at::Tensor class_logits = class_logits_in.detach().to(at::kFloat);
  const at::Tensor objectness_logits = objectness_logits_in.detach().to(at::kFloat);
  const at::Tensor boxes = boxes_in.detach().to(at::kFloat);
  const std::int64_t batch = class_logits.size(0), anchors = class_logits.size(1);
  const std::int64_t slots = targets.slots();
  if (slots == 0) {
    return {at::zeros({batch, anchors}, boxes.options().dtype(at::kBool)),
            at::zeros({batch, anchors}, boxes.options().dtype(at::kLong)), at::zeros({batch, anchors}, boxes.options())};
  }
  const at::Tensor gt = targets.boxes_cxcywh.to(at::kFloat);  // [B, G, 4]
  const at::Tensor valid = targets.valid.unsqueeze(-1);        // [B, G, 1]

  // Geometry prior.
  const bool original = variant == SimOtaVariant::Original;
  const at::Tensor stride = strides.view({1, 1, anchors});
  const at::Tensor x = ((cells.select(1, 0) + 0.5) * strides).view({1, 1, anchors});
  const at::Tensor y = ((cells.select(1, 1) + 0.5) * strides).view({1, 1, anchors});
  const auto part = [&](int i) { return gt.select(2, i).unsqueeze(-1); };  // [B, G, 1]
  const at::Tensor radius = stride * (original ? 2.5 : 1.5);
  const at::Tensor in_centre = at::stack({x - (part(0) - radius), y - (part(1) - radius), (part(0) + radius) - x,
                                          (part(1) + radius) - y}, -1).amin(-1) > 0.0;
  at::Tensor geometry = in_centre & valid, candidate_of_box = geometry;
  if (original) {
    const at::Tensor half_w = part(2) * 0.5, half_h = part(3) * 0.5;
    const at::Tensor in_box = at::stack({x - (part(0) - half_w), y - (part(1) - half_h), (part(0) + half_w) - x,
                                         (part(1) + half_h) - y}, -1).amin(-1) > 0.0;
    geometry = in_box & in_centre & valid;
    candidate_of_box = (in_box | in_centre) & valid;
  }
  const at::Tensor candidate = candidate_of_box.any(1, /*keepdim=*/true);  // [B, 1, A]: anchors any box may take
  const bool per_image = boxes.device().is_cpu() && !dense;
  if (!per_image) {
    return match(class_logits, objectness_logits, boxes, gt, targets.classes, valid, geometry, candidate, original);
  }
  // On the CPU, each image's costs over the anchors some box of it may take, not over all A: an
  // anchor no box may take has IoU 0 and infinite cost, so it neither adds to dynamic_k nor is
  // ever matched.
  at::Tensor foreground = at::zeros({batch, anchors}, boxes.options().dtype(at::kBool));
  at::Tensor gt_index = at::zeros({batch, anchors}, boxes.options().dtype(at::kLong));
  at::Tensor matched_iou = at::zeros({batch, anchors}, boxes.options());
  for (std::int64_t b = 0; b < batch; ++b) {
    const at::Tensor taken = candidate[b][0].nonzero().squeeze(1);
    if (taken.numel() == 0) continue;
    const auto pick = [&](const at::Tensor& t, std::int64_t dim) { return t[b].index_select(dim, taken).unsqueeze(0); };
    const SimOtaAssignment one =
        match(pick(class_logits, 0), pick(objectness_logits, 0), pick(boxes, 0), gt.narrow(0, b, 1),
              targets.classes.narrow(0, b, 1), valid.narrow(0, b, 1), pick(geometry, 1), pick(candidate, 1), original);
    foreground[b].index_copy_(0, taken, one.foreground[0]);
    gt_index[b].index_copy_(0, taken, one.gt_index[0]);
    matched_iou[b].index_copy_(0, taken, one.iou[0]);
  }
  return {foreground, gt_index, matched_iou};
}

LossTerms simota_loss(const SimOtaPredictions& predictions, const TargetBatch& targets, const SimOtaLossOptions& options,
                      const at::Tensor& raw_box) {
  const at::Tensor& boxes = predictions.boxes;
  const at::Tensor& objectness = predictions.objectness;
  const at::Tensor& class_logits = predictions.class_logits;
  const std::int64_t batch = boxes.size(0);
  const SimOtaAssignment assigned = simota_assign(class_logits, objectness, boxes, predictions.cells, predictions.strides,
                                                  targets, options.variant);
  const at::Tensor foreground = assigned.foreground.to(at::kFloat);  // [B, A]
  const at::Tensor norm = loss_normaliser(foreground.sum(), options.global_normaliser);
  const std::int64_t slots = targets.slots();
  const at::Tensor target_box =
      slots == 0 ? at::zeros_like(boxes)
                 : targets.boxes_cxcywh.to(at::kFloat).gather(1, assigned.gt_index.unsqueeze(-1).expand({batch, -1, 4}));
  const at::Tensor target_class =
      slots == 0 ? at::zeros_like(assigned.gt_index) : targets.classes.gather(1, assigned.gt_index);

  // Background anchors get a harmless unit box so the IoU stays finite before it is masked.
  const at::Tensor safe_target = at::where(assigned.foreground.unsqueeze(-1), target_box, at::ones_like(target_box));
  const at::Tensor iou = centre_size_iou(boxes, safe_target, 1e-16);
  const at::Tensor iou_loss = ((1 - iou.square()) * foreground).sum() / norm;
  const at::Tensor obj_loss =
      at::binary_cross_entropy_with_logits(objectness, foreground, {}, {}, at::Reduction::None).sum() / norm;
  const at::Tensor class_target = at::zeros_like(class_logits).scatter_(-1, target_class.unsqueeze(-1), 1.0) *
                                  assigned.iou.unsqueeze(-1);
  const at::Tensor cls_loss =
      (at::binary_cross_entropy_with_logits(class_logits, class_target, {}, {}, at::Reduction::None).sum(-1) *
       foreground).sum() / norm;
  at::Tensor l1_loss = at::zeros({}, boxes.options());
  if (options.use_l1) {
    const at::Tensor stride = predictions.strides.view({1, -1, 1});
    const at::Tensor cell_target = safe_target.narrow(2, 0, 2) / stride - predictions.cells.unsqueeze(0);
    const at::Tensor size_target = (safe_target.narrow(2, 2, 2) / stride + 1e-8).log();
    const at::Tensor l1_target = at::cat({cell_target, size_target}, 2);
    l1_loss = ((raw_box - l1_target).abs().sum(-1) * foreground).sum() / norm;
  }
  const at::Tensor weighted_iou = options.iou_gain * iou_loss;
  const at::Tensor gt_count = targets.valid.sum().to(at::kFloat).clamp_min(1.0);
  return {weighted_iou + obj_loss + cls_loss + l1_loss,  // num_fg as LibreYOLO logs it: max(fg, 1) / boxes
          {{"iou_loss", weighted_iou.detach()},
           {"obj_loss", obj_loss.detach()},
           {"cls_loss", cls_loss.detach()},
           {"l1_loss", l1_loss.detach()},
           {"num_fg", norm / gt_count}}};
}

}  // namespace libreyolo::models::yolo_common
