#include "models/detr_common/sampling.h"

#include <torch/nn/functional/vision.h>

namespace libreyolo::models::detr {

at::Tensor bilinear_sample(const at::Tensor& values, const at::Tensor& grid) {
  if (values.is_cuda() && at::globalContext().deterministicAlgorithms()) return bilinear_sample_by_gathers(values, grid);
  namespace F = torch::nn::functional;
  return F::grid_sample(values, grid, F::GridSampleFuncOptions().mode(torch::kBilinear).padding_mode(torch::kZeros).align_corners(false));
}

at::Tensor bilinear_sample_by_gathers(const at::Tensor& values, const at::Tensor& grid) {
  const int64_t n = values.size(0), channels = values.size(1), h = values.size(2), w = values.size(3);
  const int64_t out_h = grid.size(1), out_w = grid.size(2);
  // pixel coordinates, align_corners=false: -1 is the left edge of pixel 0, 1 the right edge of the last
  const at::Tensor x = ((grid.select(-1, 0) + 1) * static_cast<double>(w) - 1) / 2;
  const at::Tensor y = ((grid.select(-1, 1) + 1) * static_cast<double>(h) - 1) / 2;
  const at::Tensor x0 = x.detach().floor(), y0 = y.detach().floor();
  const at::Tensor x1 = x0 + 1, y1 = y0 + 1;
  const at::Tensor flat = values.reshape({n, channels, h * w});
  const auto corner = [&](const at::Tensor& cx, const at::Tensor& cy, const at::Tensor& weight) {
    const at::Tensor inside = (cx >= 0).logical_and(cx < static_cast<double>(w)).logical_and(cy >= 0).logical_and(cy < static_cast<double>(h));
    const at::Tensor index = (cy.clamp(0, static_cast<double>(h - 1)) * static_cast<double>(w) + cx.clamp(0, static_cast<double>(w - 1)))
                                 .to(at::kLong)
                                 .reshape({n, 1, out_h * out_w})
                                 .expand({n, channels, out_h * out_w});
    const at::Tensor sampled = flat.gather(2, index).reshape({n, channels, out_h, out_w});
    return sampled * (weight * inside.to(weight.scalar_type())).unsqueeze(1);
  };
  // grid_sample's weights and order: north-west, north-east, south-west, south-east
  return corner(x0, y0, (x1 - x) * (y1 - y)) + corner(x1, y0, (x - x0) * (y1 - y)) + corner(x0, y1, (x1 - x) * (y - y0)) +
         corner(x1, y1, (x - x0) * (y - y0));
}

}  // namespace libreyolo::models::detr
