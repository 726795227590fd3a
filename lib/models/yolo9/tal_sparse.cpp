// TAL on the CPU over candidate pairs only (see loss.h). The dense form scores every (box, anchor)
// pair, G × A CIoUs per image (16 × 80 × 8400 at 640), and keeps about fifteen [B, G, A] tensors;
// a box can only take anchors whose centre lies inside it and within reg_max − 1.01 strides of
// every side, a rectangle of cells per level, so this form scores those and nothing else. A box
// left without a candidate of non-zero alignment scores its whole row, as the dense form does.
#include "models/yolo9/loss.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <optional>
#include <vector>

namespace libreyolo::models::yolo9 {
namespace {

struct Box {
  float x1, y1, x2, y2;
};

// complete_iou (box_ops.cpp) for one pair, in float32 and the same order of operations.
float complete_iou_one(const Box& a, const Box& b) {
  constexpr float kEps = 1e-7f;
  const float inter = std::max(std::min(a.x2, b.x2) - std::max(a.x1, b.x1), 0.f) *
                      std::max(std::min(a.y2, b.y2) - std::max(a.y1, b.y1), 0.f);
  const float aw = a.x2 - a.x1, ah = a.y2 - a.y1, bw = b.x2 - b.x1, bh = b.y2 - b.y1;
  const float iou = inter / (aw * ah + bw * bh - inter + kEps);
  const float dx = (a.x2 + a.x1) / 2 - (b.x2 + b.x1) / 2, dy = (a.y2 + a.y1) / 2 - (b.y2 + b.y1) / 2;
  const float centre_distance = dx * dx + dy * dy;
  const float wx = std::max(a.x2, b.x2) - std::min(a.x1, b.x1), wy = std::max(a.y2, b.y2) - std::min(a.y1, b.y1);
  const float diagonal = wx * wx + wy * wy + kEps;
  const float aspect = std::atan(aw / (ah + kEps)) - std::atan(bw / (bh + kEps));
  const float v = aspect * aspect * static_cast<float>(4 / (std::numbers::pi * std::numbers::pi));
  const float alpha = v / (v - iou + 1 + kEps);
  return iou - centre_distance / diagonal - alpha * v;
}

// One detection level: anchors [offset, offset + width·height), row-major, centres (i + 0.5)·stride.
struct Level {
  std::int64_t offset, width, height;
  float stride;
};

// The levels read off `centres` and `strides`, or nothing when they are not such a grid.
std::optional<std::vector<Level>> grid_levels(const float* centres, const float* strides, std::int64_t anchors) {
  std::vector<Level> levels;
  for (std::int64_t start = 0; start < anchors;) {
    const float stride = strides[start];
    std::int64_t end = start;
    while (end < anchors && strides[end] == stride) ++end;
    std::int64_t width = 0;
    while (start + width < end && centres[2 * (start + width) + 1] == centres[2 * start + 1]) ++width;
    if (width == 0 || (end - start) % width != 0) return std::nullopt;
    const Level level{start, width, (end - start) / width, stride};
    for (std::int64_t a = start; a < end; ++a) {
      const std::int64_t i = (a - start) % width, j = (a - start) / width;
      if (centres[2 * a] != (static_cast<float>(i) + 0.5f) * stride ||
          centres[2 * a + 1] != (static_cast<float>(j) + 0.5f) * stride) {
        return std::nullopt;
      }
    }
    levels.push_back(level);
    start = end;
  }
  return levels;
}

struct Pair {
  std::int64_t anchor;
  float iou, metric;
};

}  // namespace

std::optional<TalAssignment> tal_assign_sparse(const at::Tensor& class_logits_in, const at::Tensor& boxes_in,
                                               const at::Tensor& centres_in, const at::Tensor& strides_in,
                                               const TargetBatch& targets, const TalOptions& options) {
  RECORD_FUNCTION("libreyolo::tal_assign_sparse", std::vector<c10::IValue>());  // a span in the profiler's operators
  at::NoGradGuard no_grad;
  const at::Tensor class_logits = class_logits_in.detach().to(at::kFloat).contiguous();
  const at::Tensor boxes = boxes_in.detach().to(at::kFloat).contiguous();
  const at::Tensor centres = centres_in.to(at::kFloat).contiguous(), strides = strides_in.to(at::kFloat).contiguous();
  const std::int64_t batch = class_logits.size(0), anchors = class_logits.size(1), classes = class_logits.size(2);
  const std::int64_t slots = targets.slots();
  if (!class_logits.device().is_cpu() || !boxes.device().is_cpu() || slots == 0) return std::nullopt;
  const auto levels = grid_levels(centres.data_ptr<float>(), strides.data_ptr<float>(), anchors);
  if (!levels) return std::nullopt;

  const at::Tensor gt_boxes = targets.boxes_xyxy.to(at::kFloat).contiguous();
  const at::Tensor gt_classes = targets.classes.to(at::kLong).contiguous();
  const at::Tensor valid = targets.valid.to(at::kBool).contiguous();
  at::Tensor foreground = at::zeros({batch, anchors}, boxes.options().dtype(at::kBool));
  at::Tensor gt_index = at::zeros({batch, anchors}, boxes.options().dtype(at::kLong));
  at::Tensor target_scores = at::zeros({batch, anchors, classes}, class_logits.options());
  at::Tensor target_boxes = at::empty({batch, anchors, 4}, boxes.options());

  const float limit = static_cast<float>(options.reg_max - 1.01);
  const auto k = static_cast<std::size_t>(std::min<std::int64_t>(options.topk, anchors));
  const auto iou_factor = static_cast<float>(options.iou_factor), cls_factor = static_cast<float>(options.cls_factor);
  const float* centre = centres.data_ptr<float>();
  const float* stride = strides.data_ptr<float>();

  at::parallel_for(0, batch, 1, [&](std::int64_t begin, std::int64_t end) {
    std::vector<std::vector<Pair>> chosen(static_cast<std::size_t>(slots));
    std::vector<std::int64_t> owner(static_cast<std::size_t>(anchors));
    std::vector<float> owner_iou(static_cast<std::size_t>(anchors));
    for (std::int64_t b = begin; b < end; ++b) {
      const Box* predicted = reinterpret_cast<const Box*>(boxes.data_ptr<float>()) + b * anchors;
      const float* logits = class_logits.data_ptr<float>() + b * anchors * classes;
      const Box* truth = reinterpret_cast<const Box*>(gt_boxes.data_ptr<float>()) + b * slots;
      const std::int64_t* cls = gt_classes.data_ptr<std::int64_t>() + b * slots;
      const bool* is_valid = valid.data_ptr<bool>() + b * slots;
      const auto pair_for = [&](std::int64_t g, std::int64_t a) {
        const float iou = std::clamp(complete_iou_one(truth[g], predicted[a]), 0.f, 1.f);
        const float score = 1.f / (1.f + std::exp(-logits[a * classes + cls[g]]));
        const float score_term = cls_factor == 0.5f ? std::sqrt(score) : std::pow(score, cls_factor);  // ATen's pow(x, 0.5) is sqrt
        return Pair{a, iou, std::pow(iou, iou_factor) * score_term};
      };

      for (std::int64_t g = 0; g < slots; ++g) {
        std::vector<Pair>& mine = chosen[static_cast<std::size_t>(g)];
        mine.clear();
        if (!is_valid[g]) continue;
        const Box& box = truth[g];
        // Candidates: the dense form's test, on the cells of each level that can pass it (one
        // cell of margin either way, so rounding at the edges cannot lose one).
        for (const Level& level : *levels) {
          const float s = level.stride, reach = limit * s;
          const auto first = [&](float low) { return std::max<std::int64_t>(static_cast<std::int64_t>(std::floor(low / s - 0.5f)) - 1, 0); };
          const auto last = [&](float high, std::int64_t size) {
            return std::min<std::int64_t>(static_cast<std::int64_t>(std::ceil(high / s - 0.5f)) + 1, size - 1);
          };
          const std::int64_t i0 = first(std::max(box.x1, box.x2 - reach)), i1 = last(std::min(box.x2, box.x1 + reach), level.width);
          const std::int64_t j0 = first(std::max(box.y1, box.y2 - reach)), j1 = last(std::min(box.y2, box.y1 + reach), level.height);
          for (std::int64_t j = j0; j <= j1; ++j) {
            for (std::int64_t i = i0; i <= i1; ++i) {
              const std::int64_t a = level.offset + j * level.width + i;
              const float x = centre[2 * a], y = centre[2 * a + 1], sa = stride[a];
              const float d0 = (x - box.x1) / sa, d1 = (y - box.y1) / sa, d2 = (box.x2 - x) / sa, d3 = (box.y2 - y) / sa;
              if (std::min({d0, d1, d2, d3}) < 0 || std::max({d0, d1, d2, d3}) > limit) continue;
              const Pair pair = pair_for(g, a);
              if (pair.metric > 0) mine.push_back(pair);
            }
          }
        }
        // Top-k by alignment (ties to the lower anchor index).
        const auto better = [](const Pair& l, const Pair& r) {
          return l.metric > r.metric || (l.metric == r.metric && l.anchor < r.anchor);
        };
        if (mine.size() > k) {
          std::partial_sort(mine.begin(), mine.begin() + static_cast<std::ptrdiff_t>(k), mine.end(), better);
          mine.resize(k);
        }
        if (mine.empty()) {  // best-aligned anchor over the whole row, candidate or not
          Pair best{0, 0.f, 0.f};
          for (std::int64_t a = 0; a < anchors; ++a) {
            const Pair pair = pair_for(g, a);
            if (pair.metric > best.metric) best = pair;
          }
          if (best.metric > 0) mine.push_back(best);
        }
      }

      // An anchor claimed by several boxes goes to the one it overlaps most (the first on a tie).
      std::fill(owner.begin(), owner.end(), -1);
      for (std::int64_t g = 0; g < slots; ++g) {
        for (const Pair& pair : chosen[static_cast<std::size_t>(g)]) {
          auto& current = owner[static_cast<std::size_t>(pair.anchor)];
          if (current < 0 || pair.iou > owner_iou[static_cast<std::size_t>(pair.anchor)]) {
            current = g;
            owner_iou[static_cast<std::size_t>(pair.anchor)] = pair.iou;
          }
        }
      }

      bool* fg = foreground.data_ptr<bool>() + b * anchors;
      std::int64_t* index = gt_index.data_ptr<std::int64_t>() + b * anchors;
      float* scores = target_scores.data_ptr<float>() + b * anchors * classes;
      // Score target: alignment normalised per box to its best kept alignment, times its best kept IoU.
      for (std::int64_t g = 0; g < slots; ++g) {
        const auto& mine = chosen[static_cast<std::size_t>(g)];
        float best_metric = 0.f, best_iou = 0.f;
        for (const Pair& pair : mine) {
          if (owner[static_cast<std::size_t>(pair.anchor)] != g) continue;
          best_metric = std::max(best_metric, pair.metric);
          best_iou = std::max(best_iou, pair.iou);
        }
        for (const Pair& pair : mine) {
          if (owner[static_cast<std::size_t>(pair.anchor)] != g) continue;
          fg[pair.anchor] = true;
          index[pair.anchor] = g;
          scores[pair.anchor * classes + cls[g]] = pair.metric / (best_metric + 1e-9f) * best_iou;
        }
      }
      Box* target = reinterpret_cast<Box*>(target_boxes.data_ptr<float>()) + b * anchors;
      for (std::int64_t a = 0; a < anchors; ++a) target[a] = truth[index[a]];  // slot 0 on background
    }
  });
  return TalAssignment{foreground, gt_index, target_scores, target_boxes};
}

}  // namespace libreyolo::models::yolo9
