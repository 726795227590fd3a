// The encoder-decoder detectors' detections, without NMS: per image, the top-k (query, class)
// pairs of the sigmoid scores over all queries and classes (a query may give several classes),
// their boxes scaled from normalised (cx, cy, w, h) to the image's pixels, then those above the
// confidence kept, as LibreYOLO's RT-DETR and D-FINE postprocess does.
#pragma once

#include <ATen/Tensor.h>

#include <utility>
#include <vector>

namespace libreyolo::models::detr {

// `logits` [B, Q, C], `boxes` [B, Q, 4]; `sizes[b]` = (width, height) to scale image b's boxes to.
// Per image [K, 6] (x1, y1, x2, y2, score, class), by descending score. `clamp_sizes`: negative
// widths and heights read as 0 (D-FINE's and DEIM's box conversion).
std::vector<at::Tensor> top_detections(const at::Tensor& logits, const at::Tensor& boxes,
                                       const std::vector<std::pair<double, double>>& sizes, double confidence,
                                       int max_detections, bool clamp_sizes = false);

}  // namespace libreyolo::models::detr
