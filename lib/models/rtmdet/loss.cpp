#include "models/rtmdet/loss.h"

#include "models/anchors.h"
#include "models/rtmdet/model.h"

#include <ATen/ATen.h>

#include <cmath>

namespace libreyolo::models::rtmdet {

namespace {

constexpr double kEps = 1e-7;
constexpr int kTopK = 13;
constexpr double kIouWeight = 3.0;
constexpr double kCentreRadius = 3.0;

// [P, Q] IoU of xyxy boxes, the union clamped at 1e-7 (the assigner's).
at::Tensor pairwise_iou(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor lt = at::max(a.unsqueeze(1).narrow(2, 0, 2), b.unsqueeze(0).narrow(2, 0, 2));
  const at::Tensor rb = at::min(a.unsqueeze(1).narrow(2, 2, 2), b.unsqueeze(0).narrow(2, 2, 2));
  const at::Tensor wh = (rb - lt).clamp_min(0);
  const at::Tensor inter = wh.select(2, 0) * wh.select(2, 1);
  const auto area = [](const at::Tensor& x) { return (x.select(-1, 2) - x.select(-1, 0)) * (x.select(-1, 3) - x.select(-1, 1)); };
  const at::Tensor uni = area(a).unsqueeze(1) + area(b).unsqueeze(0) - inter;
  return inter / uni.clamp_min(kEps);
}

// Element-wise GIoU of xyxy boxes [M, 4]: sizes clamped at 0, union and enclosure at 1e-7.
at::Tensor giou(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor lt = at::max(a.narrow(1, 0, 2), b.narrow(1, 0, 2)), rb = at::min(a.narrow(1, 2, 2), b.narrow(1, 2, 2));
  const at::Tensor wh = (rb - lt).clamp_min(0);
  const at::Tensor inter = wh.select(1, 0) * wh.select(1, 1);
  const auto area = [](const at::Tensor& x) {
    return (x.select(1, 2) - x.select(1, 0)).clamp_min(0) * (x.select(1, 3) - x.select(1, 1)).clamp_min(0);
  };
  const at::Tensor uni = (area(a) + area(b) - inter).clamp_min(kEps);
  const at::Tensor iou = inter / uni;
  const at::Tensor elt = at::min(a.narrow(1, 0, 2), b.narrow(1, 0, 2)), erb = at::max(a.narrow(1, 2, 2), b.narrow(1, 2, 2));
  const at::Tensor ewh = (erb - elt).clamp_min(0);
  const at::Tensor enclose = (ewh.select(1, 0) * ewh.select(1, 1)).clamp_min(kEps);
  return iou - (enclose - uni) / enclose;
}

}  // namespace

at::Tensor priors(const std::vector<at::Tensor>& maps) {
  std::vector<at::Tensor> rows;
  const auto options = maps.front().options().dtype(at::kFloat);
  for (std::size_t level = 0; level < maps.size(); ++level) {
    const double stride = kStrides[level];
    const at::Tensor xy = cell_grid(maps[level].size(2), maps[level].size(3), 0.0, options) * stride;
    rows.push_back(at::cat({xy, at::full({xy.size(0), 1}, stride, options)}, 1));
  }
  return at::cat(rows, 0);
}

Predictions predictions(const std::vector<at::Tensor>& maps) {
  std::vector<at::Tensor> flat;
  for (const at::Tensor& map : maps) flat.push_back(map.to(at::kFloat).flatten(2).transpose(1, 2));  // [B, HW, 4 + nc]
  const at::Tensor raw = at::cat(flat, 1);
  const at::Tensor prior_rows = priors(maps);
  const at::Tensor points = prior_rows.narrow(1, 0, 2).unsqueeze(0);
  const at::Tensor distance = raw.narrow(2, 0, 4);
  return {at::cat({points - distance.narrow(2, 0, 2), points + distance.narrow(2, 2, 2)}, 2), raw.narrow(2, 4, raw.size(2) - 4),
          prior_rows};
}

Assignment assign(const at::Tensor& boxes, const at::Tensor& logits, const at::Tensor& prior_points, const TargetBatch& targets) {
  at::NoGradGuard no_grad;
  const std::int64_t batch = boxes.size(0), count = boxes.size(1), classes = logits.size(2);
  Assignment out{at::zeros({batch, count}, boxes.options().dtype(at::kBool)), at::zeros({batch, count}, boxes.options().dtype(at::kLong)),
                 at::zeros({batch, count}, boxes.options())};
  const at::Tensor valid_counts = targets.valid.sum(1).cpu();
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::int64_t boxes_here = valid_counts[b].item<std::int64_t>();  // valid slots come first
    if (boxes_here == 0) continue;
    const at::Tensor gt = targets.boxes_xyxy[b].narrow(0, 0, boxes_here).to(at::kFloat);
    const at::Tensor labels = targets.classes[b].narrow(0, 0, boxes_here);
    const at::Tensor px = prior_points.select(1, 0).unsqueeze(1), py = prior_points.select(1, 1).unsqueeze(1);
    const at::Tensor deltas = at::stack({px - gt.select(1, 0), py - gt.select(1, 1), gt.select(1, 2) - px, gt.select(1, 3) - py}, -1);
    const at::Tensor candidates = std::get<0>(deltas.min(-1)).gt(0).any(1).nonzero().squeeze(1);  // inside some box
    const std::int64_t n = candidates.size(0);
    if (n == 0) continue;
    const at::Tensor pred = boxes[b].index_select(0, candidates), logit = logits[b].index_select(0, candidates);
    const at::Tensor point = prior_points.index_select(0, candidates);
    const at::Tensor centre = (gt.narrow(1, 0, 2) + gt.narrow(1, 2, 2)) / 2;
    const at::Tensor distance = (point.narrow(1, 0, 2).unsqueeze(1) - centre.unsqueeze(0)).pow(2).sum(-1).sqrt() / point.select(1, 2).unsqueeze(1);
    const at::Tensor centre_cost = at::pow(10.0, distance - kCentreRadius);
    const at::Tensor iou = pairwise_iou(pred, gt);  // [n, G]
    const at::Tensor iou_cost = -at::log(iou + kEps) * kIouWeight;
    const at::Tensor soft = at::one_hot(labels, classes).to(at::kFloat).unsqueeze(0) * iou.unsqueeze(-1);  // [n, G, C]
    const at::Tensor x = logit.unsqueeze(1).expand_as(soft);
    const at::Tensor class_cost =
        (at::binary_cross_entropy_with_logits(x, soft, {}, {}, at::Reduction::None) * (soft - x.sigmoid()).abs().pow(2)).sum(-1);
    const at::Tensor cost = class_cost + iou_cost + centre_cost;  // [n, G]

    const at::Tensor dynamic_k = std::get<0>(iou.topk(std::min<std::int64_t>(kTopK, n), 0)).sum(0).to(at::kInt).clamp_min(1).cpu();
    at::Tensor matching = at::zeros_like(cost, cost.options().dtype(at::kByte));
    for (std::int64_t g = 0; g < boxes_here; ++g) {
      const at::Tensor picked = std::get<1>(cost.select(1, g).topk(dynamic_k[g].item<std::int64_t>(), 0, /*largest=*/false));
      matching.select(1, g).index_fill_(0, picked, 1);
    }
    const at::Tensor claims = matching.sum(1);
    const at::Tensor multiple = claims.gt(1);
    if (multiple.any().item<bool>()) {  // a prior claimed twice goes to its cheapest box over all boxes
      const at::Tensor rows = multiple.nonzero().squeeze(1);
      const at::Tensor cheapest = std::get<1>(cost.index_select(0, rows).min(1));
      matching.index_fill_(0, rows, 0);
      matching.index_put_({rows, cheapest}, at::ones_like(cheapest, matching.options()));
    }
    const at::Tensor fg = matching.sum(1).gt(0);
    const at::Tensor fg_rows = fg.nonzero().squeeze(1);
    const at::Tensor matched = matching.index_select(0, fg_rows).argmax(1);
    const at::Tensor where = candidates.index_select(0, fg_rows);
    out.foreground[b].index_fill_(0, where, true);
    out.gt_index[b].index_copy_(0, where, matched);
    out.iou[b].index_copy_(0, where, iou.index_select(0, fg_rows).gather(1, matched.unsqueeze(1)).squeeze(1));
  }
  return out;
}

LossTerms loss(const std::vector<at::Tensor>& maps, const TargetBatch& targets, const LossOptions& options) {
  const Predictions p = predictions(maps);
  const Assignment a = assign(p.boxes.detach(), p.logits.detach(), p.priors, targets);
  const at::Tensor norm = loss_normaliser(a.iou.sum(), options.global_normaliser);
  const std::int64_t batch = p.boxes.size(0);
  const at::Tensor slots_class = targets.slots() == 0 ? at::zeros_like(a.gt_index) : targets.classes.gather(1, a.gt_index);

  // QFL: every class of every prior against 0, the matched class of a foreground prior against its IoU.
  const at::Tensor sigma = p.logits.sigmoid();
  const at::Tensor positive = at::zeros_like(p.logits, p.logits.options().dtype(at::kBool))
                                  .scatter_(2, slots_class.unsqueeze(-1), a.foreground.unsqueeze(-1));
  const at::Tensor score = at::zeros_like(p.logits).scatter_(2, slots_class.unsqueeze(-1), a.iou.unsqueeze(-1));
  const at::Tensor target = at::where(positive, score, at::zeros_like(score));
  const at::Tensor qfl = at::binary_cross_entropy_with_logits(p.logits, target, {}, {}, at::Reduction::None) * (target - sigma).abs().pow(2);
  const at::Tensor cls_loss = options.cls_weight * qfl.sum() / norm;

  at::Tensor bbox_loss;
  const at::Tensor rows = a.foreground.flatten().nonzero().squeeze(1);
  if (rows.numel() == 0) {
    bbox_loss = p.boxes.sum() * 0;
  } else {
    const at::Tensor pred = p.boxes.flatten(0, 1).index_select(0, rows);
    const at::Tensor gt = targets.boxes_xyxy.to(at::kFloat).gather(1, a.gt_index.unsqueeze(-1).expand({batch, -1, 4})).flatten(0, 1).index_select(0, rows);
    const at::Tensor weight = a.iou.flatten().index_select(0, rows);
    bbox_loss = options.box_weight * ((1 - giou(pred, gt)) * weight).sum() / norm;
  }
  return {cls_loss + bbox_loss, {{"cls_loss", cls_loss.detach()}, {"bbox_loss", bbox_loss.detach()}}};
}

Decoded decode(const std::vector<at::Tensor>& maps) {
  const Predictions p = predictions(maps);
  return {p.boxes, p.logits.sigmoid()};
}

}  // namespace libreyolo::models::rtmdet
