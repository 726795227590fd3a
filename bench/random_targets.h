// The loss and assigner benchmarks' ground truth: `per_image` boxes in each of `batch` images of
// an imgsz × imgsz input, centres uniform, sides log-uniform from 4 to imgsz/2 pixels (COCO-like).
#pragma once

#include "models/targets.h"

#include <ATen/ATen.h>

#include <cmath>
#include <cstdint>

namespace libreyolo::bench {

inline models::TargetBatch random_targets(int batch, int per_image, int classes, int imgsz) {
  const std::int64_t rows = static_cast<std::int64_t>(batch) * per_image;
  const at::Tensor image = at::arange(batch, at::kFloat).repeat_interleave(per_image);
  const at::Tensor cls = at::randint(classes, {rows}).to(at::kFloat);
  const at::Tensor centre = at::rand({rows, 2}) * 0.8 + 0.1;
  const at::Tensor sides = at::exp(at::rand({rows, 2}) * std::log(imgsz / 8.0)) * 4.0 / imgsz;
  return models::pad_targets(at::cat({image.unsqueeze(1), cls.unsqueeze(1), centre, sides}, 1), batch, imgsz, imgsz);
}

}  // namespace libreyolo::bench
