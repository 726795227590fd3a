// What the DETR families' Family implementations share: RT-DETR's outputs packed as the trainer
// carries a network's maps, the targets as the matcher and denoising take them, a batch's
// denoising queries, the input-size check and the frozen-norm test.
#pragma once

#include "models/detr_common/criterion.h"
#include "models/detr_common/denoising.h"
#include "models/family.h"

#include <ATen/Tensor.h>

#include <map>
#include <string>
#include <vector>

namespace libreyolo::models::detr {

// The outputs as the trainer carries a network's maps: a header [levels of auxiliary,
// levels of denoising, denoising groups, images, input width, input height] (int64, CPU), the
// last layer's logits and boxes, each auxiliary then denoising level's, then the images' denoising
// positives. `width`/`height`: the network input's, to scale the targets' pixel boxes.
std::vector<at::Tensor> pack_outputs(const DetrOutputs& outputs, std::int64_t width, std::int64_t height);
struct PackedOutputs {
  DetrOutputs outputs;
  std::int64_t width = 0, height = 0;
};
PackedOutputs unpack_outputs(const std::vector<at::Tensor>& packed);

// The padded targets (input pixels) as the matcher and denoising take them: classes and
// normalised (cx, cy, w, h) boxes of every image in turn, and each image's count.
DetrTargets detr_targets(const TargetBatch& targets, std::int64_t width, std::int64_t height);

// A training batch's contrastive denoising queries for input `x`, drawn from the run's seeded
// generator (a checkpoint saves its state); a named phase in the profiler. `mirror_negative`:
// D-FINE's and DEIM's box noise. `share`: in data-parallel training the groups follow the global
// batch's most targets and each image gets the noise one process draws for it.
DenoisingQueries batch_denoising(const at::Tensor& x, const TargetBatch& targets, int classes, int queries, bool mirror_negative,
                                 const BatchShare& share = {});

// Why a DETR that selects `queries` among its encoder's positions (one per cell of each map at
// `strides`) cannot take square inputs of `image_size`, naming the smallest size that can; "" when
// it can. `display`: the family as the message names it.
std::string query_positions_obstacle(const std::string& display, const std::vector<int>& strides, int image_size, int queries);

// Whether a state dict's backbone norms are frozen ones (running statistics without
// num_batches_tracked): how LibreYOLO's DETRs trained from weights write them.
bool holds_frozen_backbone_norms(const std::map<std::string, at::Tensor>& tensors);

}  // namespace libreyolo::models::detr
