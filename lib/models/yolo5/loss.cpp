#include "models/yolo5/loss.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <cmath>
#include <numbers>

namespace libreyolo::models::yolo5 {

namespace {

// yolov5's bbox_iou(xywh=True, CIoU=True): (x, y, w, h) pairs, eps 1e-7 in the union and the
// enclosing diagonal only (the aspect term divides w by h as they are), alpha without gradient.
at::Tensor complete_iou_xywh(const at::Tensor& a, const at::Tensor& b) {
  constexpr double kEps = 1e-7;
  const at::Tensor x1 = a.select(1, 0), y1 = a.select(1, 1), w1 = a.select(1, 2), h1 = a.select(1, 3);
  const at::Tensor x2 = b.select(1, 0), y2 = b.select(1, 1), w2 = b.select(1, 2), h2 = b.select(1, 3);
  const at::Tensor w1h = w1 / 2, h1h = h1 / 2, w2h = w2 / 2, h2h = h2 / 2;
  const at::Tensor ax1 = x1 - w1h, ax2 = x1 + w1h, ay1 = y1 - h1h, ay2 = y1 + h1h;
  const at::Tensor bx1 = x2 - w2h, bx2 = x2 + w2h, by1 = y2 - h2h, by2 = y2 + h2h;
  const at::Tensor inter = (at::minimum(ax2, bx2) - at::maximum(ax1, bx1)).clamp_min(0) *
                           (at::minimum(ay2, by2) - at::maximum(ay1, by1)).clamp_min(0);
  const at::Tensor iou = inter / (w1 * h1 + w2 * h2 - inter + kEps);
  const at::Tensor cw = at::maximum(ax2, bx2) - at::minimum(ax1, bx1), ch = at::maximum(ay2, by2) - at::minimum(ay1, by1);
  const at::Tensor c2 = cw.pow(2) + ch.pow(2) + kEps;
  const at::Tensor rho2 = ((bx1 + bx2 - ax1 - ax2).pow(2) + (by1 + by2 - ay1 - ay2).pow(2)) / 4;
  const at::Tensor v = (at::atan(w2 / h2) - at::atan(w1 / h1)).pow(2) * (4 / (std::numbers::pi * std::numbers::pi));
  at::Tensor alpha;
  {
    at::NoGradGuard no_grad;
    alpha = v / (v - iou + (1 + kEps));
  }
  return iou - (rho2 / c2 + v * alpha);
}

// BCEWithLogitsLoss(pos_weight=1.0): yolov5 passes the weight, which changes the arithmetic.
at::Tensor bce(const at::Tensor& logits, const at::Tensor& targets, at::Reduction::Reduction reduction) {
  return at::binary_cross_entropy_with_logits(logits, targets, {}, at::ones({1}, logits.options()), reduction);
}

at::Tensor bce_mean(const at::Tensor& logits, const at::Tensor& targets) { return bce(logits, targets, at::Reduction::Mean); }

// The matches' objectness targets, written where several matches share a cell (boxes of one image
// with the same anchor, in their own or a neighbour cell) by a fixed rule: the last match in
// yolov5's target order wins, as its `tobj[b, a, gj, gi] = iou` leaves it on the CPU. index_put_
// with repeated indices promises no winner (CUDA, or ATen's parallel loop over 32768 entries),
// so only each cell's last match is written.
void write_objectness(at::Tensor& objectness, const LevelTargets& t, const at::Tensor& iou) {
  const std::int64_t anchors = objectness.size(1), ny = objectness.size(2), nx = objectness.size(3);
  const at::Tensor cell = ((t.image * anchors + t.anchor) * ny + t.gj) * nx + t.gi;
  const at::Tensor order = at::arange(cell.size(0), cell.options());
  const at::Tensor last = at::full({objectness.numel()}, -1, cell.options()).scatter_reduce_(0, cell, order, "amax");
  const at::Tensor kept = last.index_select(0, cell).eq(order);
  objectness.view(-1).index_put_({cell.masked_select(kept)}, iou.detach().clamp_min(0).masked_select(kept));
}

}  // namespace

LossOptions scaled_gains(double box, double obj, double cls, int classes, int image_size) {
  constexpr double levels = 3;
  LossOptions options;
  options.box_gain = box * 3 / levels;
  options.cls_gain = cls * classes / 80.0 * 3 / levels;
  options.obj_gain = obj * std::pow(image_size / 640.0, 2) * 3 / levels;
  return options;
}

LevelTargets build_targets(const at::Tensor& boxes_grid, const at::Tensor& images, const at::Tensor& anchors, std::int64_t nx,
                           std::int64_t ny, double anchor_t) {
  const auto index = at::TensorOptions().dtype(at::kLong).device(boxes_grid.device());
  const std::int64_t count = boxes_grid.size(0), anchor_count = anchors.size(0);
  // every (anchor, box) pair whose side ratios stay under anchor_t, anchor-major as yolov5 repeats them
  const at::Tensor ratio = boxes_grid.slice(1, 2, 4).unsqueeze(0) / anchors.unsqueeze(1);  // [na, n, 2]
  const at::Tensor keep = at::maximum(ratio, 1 / ratio).amax(2) < anchor_t;
  const at::Tensor anchor = at::arange(anchor_count, index).unsqueeze(1).expand({anchor_count, count}).index({keep});
  const at::Tensor box = at::arange(count, index).unsqueeze(0).expand({anchor_count, count}).index({keep});
  const at::Tensor xy = boxes_grid.index_select(0, box).slice(1, 0, 2);
  const at::Tensor inverse = at::tensor({static_cast<float>(nx), static_cast<float>(ny)}, xy.options()) - xy;
  const auto near_low = [](const at::Tensor& v) { return v.remainder(1.0).lt(0.5).logical_and(v.gt(1.0)); };
  const at::Tensor left_up = near_low(xy), right_down = near_low(inverse);  // [M, 2]: x then y
  // the box's own cell, then the left, upper, right and lower neighbours where it lies near them
  const at::Tensor chosen = at::stack({at::ones_like(left_up.select(1, 0)), left_up.select(1, 0), left_up.select(1, 1),
                                       right_down.select(1, 0), right_down.select(1, 1)});  // [5, M]
  const at::Tensor offsets =
      at::tensor({0.f, 0.f, 0.5f, 0.f, 0.f, 0.5f, -0.5f, 0.f, 0.f, -0.5f}, xy.options()).view({5, 1, 2});
  const auto pick = [&](const at::Tensor& t) { return t.unsqueeze(0).expand({5, t.size(0)}).index({chosen}); };
  const at::Tensor picked_xy = xy.unsqueeze(0).expand({5, xy.size(0), 2}).index({chosen});
  const at::Tensor picked_offsets = offsets.expand({5, xy.size(0), 2}).index({chosen});
  LevelTargets out;
  out.anchor = pick(anchor);
  out.box = pick(box);
  out.image = images.index_select(0, out.box);
  const at::Tensor cell = (picked_xy - picked_offsets).to(at::kLong);  // truncation, as .long()
  out.gi = cell.select(1, 0).clamp(0, nx - 1);
  out.gj = cell.select(1, 1).clamp(0, ny - 1);
  const at::Tensor clamped = at::stack({out.gi, out.gj}, 1).to(xy.scalar_type());
  out.target = at::cat({picked_xy - clamped, boxes_grid.index_select(0, out.box).slice(1, 2, 4)}, 1);
  return out;
}

LossTerms loss(const std::vector<at::Tensor>& maps, const TargetBatch& targets, const LossOptions& options) {
  const at::Tensor& grid_anchors = maps.back();
  const std::int64_t batch = maps.front().size(0), anchor_count = grid_anchors.size(1);
  // the batch's valid boxes in order (image, slot), as yolov5's target rows come
  const at::Tensor rows = targets.valid.flatten().nonzero().squeeze(1);
  const at::Tensor images = rows.div(targets.slots(), "floor");
  const at::Tensor classes = targets.classes.flatten().index_select(0, rows);
  const at::Tensor boxes = targets.boxes_cxcywh.flatten(0, 1).index_select(0, rows).to(at::kFloat);
  const double cp = 1.0 - 0.5 * options.label_smoothing, cn = 0.5 * options.label_smoothing;

  const auto zero = at::zeros({}, maps.front().options().dtype(at::kFloat));
  at::Tensor lbox = zero, lobj = zero, lcls = zero;
  const std::size_t levels = maps.size() - 1;
  std::vector<LevelTargets> matched;
  for (std::size_t level = 0; level < levels; ++level) {
    const at::Tensor& map = maps[level];
    matched.push_back(build_targets(boxes / static_cast<double>(8 << level), images,
                                    grid_anchors[static_cast<std::int64_t>(level)].to(at::kFloat), map.size(3), map.size(2),
                                    options.anchor_t));
  }
  // data-parallel: each level's match count over the global batch, per rank (one collective for
  // the three, on every rank and step, matches or none); one process: each level's own mean
  at::Tensor per_rank_matches;
  if (options.global_normaliser) {
    std::vector<float> counts;
    for (const LevelTargets& t : matched) counts.push_back(static_cast<float>(t.box.size(0)));
    per_rank_matches = loss_normaliser(at::tensor(counts).to(zero.device()), options.global_normaliser);
  }
  for (std::size_t level = 0; level < levels; ++level) {
    const at::Tensor& map = maps[level];
    const std::int64_t ny = map.size(2), nx = map.size(3), outputs = map.size(1) / anchor_count;
    const at::Tensor anchors = grid_anchors[static_cast<std::int64_t>(level)].to(at::kFloat);
    // [B, anchors, ny, nx, 5 + nc], as yolov5's Detect lays the map out
    const at::Tensor p = map.view({batch, anchor_count, outputs, ny, nx}).permute({0, 1, 3, 4, 2}).to(at::kFloat);
    const LevelTargets& t = matched[level];
    at::Tensor objectness = at::zeros({batch, anchor_count, ny, nx}, p.options());
    if (t.box.size(0) > 0) {
      const at::Tensor picked = p.index({t.image, t.anchor, t.gj, t.gi});  // [K, 5 + nc]
      const at::Tensor xy = picked.slice(1, 0, 2).sigmoid() * 2 - 0.5;
      const at::Tensor wh = (picked.slice(1, 2, 4).sigmoid() * 2).pow(2) * anchors.index_select(0, t.anchor);
      const at::Tensor iou = complete_iou_xywh(at::cat({xy, wh}, 1), t.target);
      const at::Tensor matches = per_rank_matches.defined() ? per_rank_matches[static_cast<std::int64_t>(level)] : at::Tensor();
      lbox = lbox + (matches.defined() ? (1.0 - iou).sum() / matches : (1.0 - iou).mean());
      write_objectness(objectness, t, iou);
      if (outputs - 5 > 1) {
        at::Tensor class_targets = at::full({picked.size(0), outputs - 5}, cn, p.options());
        class_targets.index_put_({at::arange(picked.size(0), t.box.options()), classes.index_select(0, t.box)},
                                 at::scalar_tensor(cp, p.options()));
        lcls = lcls + (matches.defined() ? bce(picked.slice(1, 5), class_targets, at::Reduction::Sum) / (matches * (outputs - 5))
                                         : bce_mean(picked.slice(1, 5), class_targets));
      }
    }
    lobj = lobj + bce_mean(p.select(4, 4), objectness) * options.balance[level];
  }
  lbox = lbox * options.box_gain;
  lobj = lobj * options.obj_gain;
  lcls = lcls * options.cls_gain;
  return {(lbox + lobj + lcls) * static_cast<double>(batch * options.world_size),
          {{"box_loss", lbox.detach()}, {"obj_loss", lobj.detach()}, {"cls_loss", lcls.detach()}}};
}

}  // namespace libreyolo::models::yolo5
