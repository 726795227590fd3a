// The set loss of the encoder-decoder detectors (RT-DETR's): each output level is matched to the
// targets by the Hungarian matcher, then scored by the varifocal loss (classes against the matched
// boxes' IoU) and the L1 and GIoU box losses over the matched queries. The levels: the last decoder
// layer, the earlier layers, the encoder's top-k proposals, and the denoising queries of every
// layer, which are matched by construction (each group's positive query i to target i).
#pragma once

#include "models/detr_common/matcher.h"
#include "models/loss_terms.h"

#include <ATen/Tensor.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace libreyolo::models::detr {

// One output level: `logits` [B, Q, C] before the sigmoid, `boxes` [B, Q, 4] normalised (cx, cy, w, h).
struct DetrLevel {
  at::Tensor logits;
  at::Tensor boxes;
};

// The denoising queries' matches: per image, the query of each positive (group-major: group 0's
// targets 0..n-1, then group 1's, ...), and the number of groups.
struct DenoisingMatch {
  std::vector<at::Tensor> positive_queries;  // int64, groups * n each
  std::int64_t groups = 0;
};

struct DetrOutputs {
  DetrLevel last;                   // the last decoder layer
  std::vector<DetrLevel> auxiliary; // the earlier decoder layers, then the encoder's proposals
  std::vector<DetrLevel> denoising; // every decoder layer's denoising queries (empty: none)
  DenoisingMatch denoising_match;
};

struct CriterionOptions {
  std::int64_t classes = 80;
  double vfl_alpha = 0.75, vfl_gamma = 2.0;
  double vfl_weight = 1.0, l1_weight = 5.0, giou_weight = 2.0;
  MatchCost match;
};

// Every weighted term under the reference's name: loss_vfl, loss_bbox, loss_giou for the last
// layer, with _aux_<i> for auxiliary level i and _dn_<i> for denoising level i.
std::vector<std::pair<std::string, at::Tensor>> detr_loss_terms(const DetrOutputs& outputs, const DetrTargets& targets,
                                                                const CriterionOptions& options,
                                                                const GlobalNormaliser& normaliser = {});

// The total, and its parts summed over the levels as vfl_loss, bbox_loss (L1) and giou_loss (what the
// progress bar and results.csv show).
LossTerms detr_loss(const DetrOutputs& outputs, const DetrTargets& targets, const CriterionOptions& options,
                    const GlobalNormaliser& normaliser = {});

}  // namespace libreyolo::models::detr
