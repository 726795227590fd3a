// The DETRs' contrastive denoising queries (RT-DETR's, and D-FINE's with mirror_negative): each target repeated in G groups, a positive copy with
// its box jittered within half its size and a negative copy jittered further, a share of their
// labels replaced by random classes, and the self-attention mask that keeps the groups and the
// matching queries from seeing one another. The random draws come from the caller (our seeded
// generator in training), so that the construction itself is deterministic and testable.
#pragma once

#include "models/detr_common/criterion.h"

#include <ATen/Tensor.h>

#include <cstdint>

namespace libreyolo::models::detr {

struct DenoisingOptions {
  std::int64_t classes = 80;
  std::int64_t queries = 300;    // the matching queries after the denoising ones
  std::int64_t denoising = 100;  // the denoising queries asked for (groups = this / the most targets of an image)
  double label_noise = 0.5;
  double box_noise = 1.0;
  bool mirror_negative = false;  // D-FINE and DEIM: a noised box's negative coordinates made positive
  // Target slots per image, at least (0: the batch's most). Data-parallel training passes the global
  // batch's most, so that every rank builds the groups one process builds for the whole batch.
  std::int64_t most_targets = 0;
};

// The draws, shaped [B, D] for labels and [B, D, 4] for boxes (D = 2 * groups * the most targets):
// `label_uniform` in [0, 1) (a label changes below label_noise / 2), `random_label` in [0, classes),
// `sign_bit` in {0, 1}, `box_uniform` in [0, 1).
struct DenoisingNoise {
  at::Tensor label_uniform, random_label, sign_bit, box_uniform;
};

struct DenoisingQueries {
  at::Tensor classes;     // [B, D] int64, the noised labels (`classes` in padded slots): the class embedding's input
  at::Tensor boxes_unact; // [B, D, 4], inverse-sigmoid of the noised (cx, cy, w, h)
  at::Tensor attn_mask;   // [D + queries, D + queries] bool, true: not attended
  DenoisingMatch match;   // the positives of each image, and the group count
  std::int64_t count = 0; // D
};

// log(x / (1 - x)) with x clipped to [0, 1] and both terms to at least eps, as the references compute it.
at::Tensor inverse_sigmoid(const at::Tensor& x, double eps = 1e-5);

// The query count D and group count for a batch, or {0, 0} when it has no target.
std::pair<std::int64_t, std::int64_t> denoising_shape(const std::vector<std::int64_t>& counts, const DenoisingOptions& options);

// Draws the noise from `generator` (the training run's seeded CPU generator), on the CPU.
DenoisingNoise draw_denoising_noise(std::int64_t images, std::int64_t count, std::int64_t classes, at::Generator generator);

// Rank `rank`'s rows of the global batch's noise (rows rank, rank + world_size, ...: the images the
// sampler dealt it), drawn for `images` per rank; one process (world_size 1) draws its own batch's.
// Every rank draws the whole global batch's, so the generators of all ranks advance alike and each
// image gets the noise one process gives it.
DenoisingNoise draw_denoising_noise_share(std::int64_t images, std::int64_t count, std::int64_t classes, at::Generator generator,
                                          int rank, int world_size);

// The queries; none (count 0) when the batch has no target or options.denoising is 0.
DenoisingQueries make_denoising_queries(const DetrTargets& targets, const DenoisingOptions& options, const DenoisingNoise& noise);

}  // namespace libreyolo::models::detr
