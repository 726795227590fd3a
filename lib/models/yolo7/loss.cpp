#include "models/yolo7/loss.h"

#include "models/anchors.h"
#include "models/yolo7/model.h"
#include "models/yolo_common/simota.h"

#include <ATen/ATen.h>

namespace libreyolo::models::yolo7 {

namespace {

// The maps as SimOTA's predictions, float32: each of a cell's anchors one, in the order (level,
// anchor, y, x).
yolo_common::SimOtaPredictions predictions(const std::vector<at::Tensor>& maps) {
  std::vector<at::Tensor> rows, cells, strides, sizes;
  const at::Tensor anchors = grid_anchors(at::TensorOptions().dtype(at::kFloat).device(maps.front().device()));
  for (std::size_t level = 0; level < maps.size(); ++level) {
    const at::Tensor map = maps[level].to(at::kFloat);  // float32 first: 459 x 401 px anchors overflow float16 areas
    const std::int64_t batch = map.size(0), height = map.size(2), width = map.size(3), outputs = map.size(1) / kAnchorsPerLevel;
    // [B, anchors x outputs, H, W] -> [B, anchors x H x W, outputs] in the order (anchor, y, x)
    rows.push_back(map.view({batch, kAnchorsPerLevel, outputs, height, width}).permute({0, 1, 3, 4, 2}).reshape({batch, -1, outputs}));
    cells.push_back(cell_grid(height, width, 0.0, map.options()).repeat({kAnchorsPerLevel, 1}));
    strides.push_back(at::full({kAnchorsPerLevel * height * width}, kStrides[level], map.options()));
    sizes.push_back((anchors[static_cast<std::int64_t>(level)] * kStrides[level]).repeat_interleave(height * width, 0));
  }
  const at::Tensor raw = at::cat(rows, 1);
  const at::Tensor cell = at::cat(cells, 0), stride = at::cat(strides, 0), anchor_pixels = at::cat(sizes, 0);
  const at::Tensor box = raw.narrow(2, 0, 4).sigmoid() * 2;
  const at::Tensor boxes = at::cat({(box.narrow(2, 0, 2) - 0.5 + cell.unsqueeze(0)) * stride.view({1, -1, 1}),
                                    box.narrow(2, 2, 2).square() * anchor_pixels.unsqueeze(0)}, 2);  // (cx, cy, w, h) pixels
  return {.boxes = boxes, .objectness = raw.select(2, 4), .class_logits = raw.narrow(2, 5, raw.size(2) - 5), .cells = cell, .strides = stride};
}

}  // namespace

at::Tensor assign(const std::vector<at::Tensor>& maps, const TargetBatch& targets) {
  at::NoGradGuard no_grad;
  const yolo_common::SimOtaPredictions p = predictions(maps);
  const yolo_common::SimOtaAssignment a = yolo_common::simota_assign(p.class_logits, p.objectness, p.boxes, p.cells, p.strides, targets);
  return at::where(a.foreground, a.gt_index + 1, at::zeros_like(a.gt_index));
}

LossTerms loss(const std::vector<at::Tensor>& maps, const TargetBatch& targets, const LossOptions& options) {
  yolo_common::SimOtaLossOptions simota{.use_l1 = false, .iou_gain = 5.0, .global_normaliser = options.global_normaliser};
  LossTerms terms = yolo_common::simota_loss(predictions(maps), targets, simota);
  std::erase_if(terms.parts, [](const auto& part) { return part.first == "l1_loss"; });
  return terms;
}

}  // namespace libreyolo::models::yolo7
