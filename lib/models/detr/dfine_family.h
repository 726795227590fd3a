// D-FINE behind the Family interface (models/family.h): the network whose training forward takes
// the batch's targets (its denoising queries), the FDR set loss, top-k postprocess without NMS,
// the stretched square input, and LibreYOLO's D-FINE recipe with AMP off by default.
#pragma once

#include "models/detr/dfine_decoder.h"
#include "models/family.h"

#include <ATen/Tensor.h>

#include <vector>

namespace libreyolo::models::detr {

const Family& dfine_family();
// DEIM: D-FINE's network with SiLU heads, MAL in place of VFL, LibreYOLO's DEIM recipe.
const Family& deim_family();
// RT-DETRv4 (s, m, l, x): D-FINE's network with SiLU heads and D-FINE's freezing, DEIM's trainer
// (MAL, DEIM's pipeline) at lr 5e-4, weight decay 1.25e-4, 58 epochs.
const Family& rtdetrv4_family();

// The outputs as the trainer carries a network's maps: a header [auxiliary levels, denoising
// levels, denoising groups, images with denoising positives, input width, input height] (int64,
// CPU), the decoder's up and reg_scale, the last level's logits, boxes, corners and references, each auxiliary level's, the pre
// and encoder levels' logits and boxes, each denoising level's four, the denoising pre level's
// two, then the images' denoising positives.
std::vector<at::Tensor> pack_dfine_outputs(const DfineOutputs& outputs, std::int64_t width, std::int64_t height);
struct PackedDfineOutputs {
  DfineOutputs outputs;
  std::int64_t width = 0, height = 0;
};
PackedDfineOutputs unpack_dfine_outputs(const std::vector<at::Tensor>& packed);

}  // namespace libreyolo::models::detr
