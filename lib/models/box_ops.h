// Box overlap measures used by the assigners and losses, broadcasting over leading dimensions
// (so one call gives a [B, G, A] matrix from [B, G, 1, 4] and [B, 1, A, 4]).
#pragma once

#include <ATen/Tensor.h>

namespace libreyolo::models {

// Complete IoU of xyxy boxes (IoU - centre distance² / enclosing diagonal² - alpha·v), with
// eps 1e-7 and alpha computed without gradient, in float32.
at::Tensor complete_iou(const at::Tensor& a, const at::Tensor& b);

// Plain IoU of (cx, cy, w, h) boxes: intersection / union, no epsilon, zero when the boxes do
// not overlap (YOLOX's assignment IoU). With `eps` added to the union for the IoU loss.
at::Tensor centre_size_iou(const at::Tensor& a, const at::Tensor& b, double eps = 0.0);

// (cx, cy, w, h) -> (x1, y1, x2, y2) and back, over the last dimension. `clamp_sizes`: negative
// widths and heights read as 0 (D-FINE's and DEIM's conversion).
at::Tensor centre_size_to_corners(const at::Tensor& boxes, bool clamp_sizes = false);
at::Tensor corners_to_centre_size(const at::Tensor& boxes);

// IoU of xyxy boxes in the DETRs' form (eps added to the union: RT-DETR's 1e-6, D-FINE's 0),
// broadcasting as below.
at::Tensor detr_iou(const at::Tensor& a, const at::Tensor& b, double eps = 1e-6);

// Generalized IoU of xyxy boxes (IoU - (enclosing area - union) / enclosing area), the DETRs'
// form: eps added to the union and to the enclosing area (RT-DETR's 1e-6, D-FINE's 0),
// broadcasting ([N, 1, 4] against [1, M, 4] gives the [N, M] matrix; equal shapes give the pairs).
at::Tensor generalized_iou(const at::Tensor& a, const at::Tensor& b, double eps = 1e-6);

}  // namespace libreyolo::models
