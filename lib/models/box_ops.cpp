#include "models/box_ops.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <numbers>

namespace libreyolo::models {

at::Tensor complete_iou(const at::Tensor& a_in, const at::Tensor& b_in) {
  constexpr double kEps = 1e-7;
  const at::Tensor a = a_in.to(at::kFloat), b = b_in.to(at::kFloat);
  const at::Tensor ax1 = a.select(-1, 0), ay1 = a.select(-1, 1), ax2 = a.select(-1, 2), ay2 = a.select(-1, 3);
  const at::Tensor bx1 = b.select(-1, 0), by1 = b.select(-1, 1), bx2 = b.select(-1, 2), by2 = b.select(-1, 3);
  const at::Tensor inter = (at::minimum(ax2, bx2) - at::maximum(ax1, bx1)).clamp_min(0) *
                           (at::minimum(ay2, by2) - at::maximum(ay1, by1)).clamp_min(0);
  const at::Tensor aw = ax2 - ax1, ah = ay2 - ay1, bw = bx2 - bx1, bh = by2 - by1;
  const at::Tensor iou = inter / (aw * ah + bw * bh - inter + kEps);
  const at::Tensor centre_distance = ((ax2 + ax1) / 2 - (bx2 + bx1) / 2).square() +
                                     ((ay2 + ay1) / 2 - (by2 + by1) / 2).square();
  const at::Tensor diagonal = (at::maximum(ax2, bx2) - at::minimum(ax1, bx1)).square() +
                              (at::maximum(ay2, by2) - at::minimum(ay1, by1)).square() + kEps;
  const at::Tensor aspect = at::atan(aw / (ah + kEps)) - at::atan(bw / (bh + kEps));
  const at::Tensor v = aspect.square() * (4 / (std::numbers::pi * std::numbers::pi));
  at::Tensor alpha;
  {
    at::NoGradGuard no_grad;
    alpha = v / (v - iou + 1 + kEps);
  }
  return iou - centre_distance / diagonal - alpha * v;
}

at::Tensor centre_size_iou(const at::Tensor& a, const at::Tensor& b, double eps) {
  const at::Tensor a_half = a.narrow(-1, 2, 2) / 2, b_half = b.narrow(-1, 2, 2) / 2;
  const at::Tensor a_centre = a.narrow(-1, 0, 2), b_centre = b.narrow(-1, 0, 2);
  const at::Tensor top_left = at::maximum(a_centre - a_half, b_centre - b_half);
  const at::Tensor bottom_right = at::minimum(a_centre + a_half, b_centre + b_half);
  const at::Tensor overlapping = (top_left < bottom_right).to(a.scalar_type()).prod(-1);
  const at::Tensor inter = (bottom_right - top_left).prod(-1) * overlapping;
  const at::Tensor area_a = a.narrow(-1, 2, 2).prod(-1), area_b = b.narrow(-1, 2, 2).prod(-1);
  at::Tensor union_area = area_a + area_b - inter;
  if (eps != 0) union_area = union_area + eps;
  return inter / union_area;
}

at::Tensor centre_size_to_corners(const at::Tensor& boxes, bool clamp_sizes) {
  const auto parts = boxes.unbind(-1);  // cx, cy, w, h
  const at::Tensor half_w = 0.5 * (clamp_sizes ? parts[2].clamp_min(0.0) : parts[2]);
  const at::Tensor half_h = 0.5 * (clamp_sizes ? parts[3].clamp_min(0.0) : parts[3]);
  return at::stack({parts[0] - half_w, parts[1] - half_h, parts[0] + half_w, parts[1] + half_h}, -1);
}

at::Tensor corners_to_centre_size(const at::Tensor& boxes) {
  const auto parts = boxes.unbind(-1);  // x1, y1, x2, y2
  return at::stack({(parts[0] + parts[2]) / 2, (parts[1] + parts[3]) / 2, parts[2] - parts[0], parts[3] - parts[1]}, -1);
}

namespace {

struct Overlap {
  at::Tensor iou, union_area;
};

// The DETRs' IoU and the union it divides by.
Overlap detr_overlap(const at::Tensor& a, const at::Tensor& b, double eps) {
  const at::Tensor a_min = a.narrow(-1, 0, 2), a_max = a.narrow(-1, 2, 2);
  const at::Tensor b_min = b.narrow(-1, 0, 2), b_max = b.narrow(-1, 2, 2);
  const at::Tensor a_size = a_max - a_min, b_size = b_max - b_min;
  const at::Tensor area_a = a_size.select(-1, 0) * a_size.select(-1, 1);
  const at::Tensor area_b = b_size.select(-1, 0) * b_size.select(-1, 1);
  const at::Tensor overlap = (at::minimum(a_max, b_max) - at::maximum(a_min, b_min)).clamp_min(0);
  const at::Tensor inter = overlap.select(-1, 0) * overlap.select(-1, 1);
  const at::Tensor union_area = area_a + area_b - inter;
  return {eps > 0 ? inter / (union_area + eps) : inter / union_area, union_area};
}

}  // namespace

at::Tensor detr_iou(const at::Tensor& a, const at::Tensor& b, double eps) { return detr_overlap(a, b, eps).iou; }

at::Tensor generalized_iou(const at::Tensor& a, const at::Tensor& b, double eps) {
  const auto [iou, union_area] = detr_overlap(a, b, eps);
  const at::Tensor a_min = a.narrow(-1, 0, 2), a_max = a.narrow(-1, 2, 2);
  const at::Tensor b_min = b.narrow(-1, 0, 2), b_max = b.narrow(-1, 2, 2);
  const at::Tensor enclosing = (at::maximum(a_max, b_max) - at::minimum(a_min, b_min)).clamp_min(0);
  const at::Tensor enclosing_area = enclosing.select(-1, 0) * enclosing.select(-1, 1);
  return iou - (enclosing_area - union_area) / (eps > 0 ? enclosing_area + eps : enclosing_area);
}

}  // namespace libreyolo::models
