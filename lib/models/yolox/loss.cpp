#include "models/yolox/loss.h"

#include "models/anchors.h"
#include "models/yolox/model.h"

#include <ATen/ATen.h>

namespace libreyolo::models::yolox {

LossTerms loss(const std::vector<at::Tensor>& maps, const TargetBatch& targets, const LossOptions& options) {
  std::vector<at::Tensor> flats;
  for (const at::Tensor& map : maps) flats.push_back(map.flatten(2).transpose(1, 2));  // [B, HW, 5 + nc]
  const at::Tensor raw = at::cat(flats, 1).to(at::kFloat);                              // [B, A, 5 + nc]
  const std::vector<int> stride_list(ModelImpl::kStrides.begin(), ModelImpl::kStrides.end());
  const AnchorPoints points = anchor_points(maps, stride_list);
  const at::Tensor stride = points.strides.view({1, -1, 1});
  const at::Tensor raw_box = raw.narrow(2, 0, 4);
  const at::Tensor boxes = at::cat({(raw_box.narrow(2, 0, 2) + points.cells.unsqueeze(0)) * stride,
                                    raw_box.narrow(2, 2, 2).exp() * stride}, 2);  // (cx, cy, w, h) pixels
  return yolo_common::simota_loss({.boxes = boxes,
                      .objectness = raw.select(2, 4),
                      .class_logits = raw.narrow(2, 5, raw.size(2) - 5),
                      .cells = points.cells,
                      .strides = points.strides},
                     targets, options, raw_box);
}

}  // namespace libreyolo::models::yolox
