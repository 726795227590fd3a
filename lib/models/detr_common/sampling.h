// The deformable attention's sampling: bilinear samples of a value map at fractional locations.
#pragma once

#include <ATen/ATen.h>

namespace libreyolo::models::detr {

// Bilinear samples of `values` [N, C, H, W] at `grid` [N, Hg, Wg, 2] (x then y, -1 and 1 the
// outer edges of the map), zero outside, align_corners=false: [N, C, Hg, Wg]. The references'
// F.grid_sample, except where deterministic algorithms are on (deterministic=true) on a CUDA
// device: grid_sample's CUDA backward adds into the value gradient with atomics, in an order that
// changes from run to run, so bilinear_sample_by_gathers takes over there.
at::Tensor bilinear_sample(const at::Tensor& values, const at::Tensor& grid);

// The same samples as four gathers (the corners) weighted and summed in grid_sample's order; its
// backward is a scatter-add, which ATen runs deterministically on CUDA in that mode. Equal to
// grid_sample to rounding, gradients too (the unit tests check it in float64).
at::Tensor bilinear_sample_by_gathers(const at::Tensor& values, const at::Tensor& grid);

}  // namespace libreyolo::models::detr
