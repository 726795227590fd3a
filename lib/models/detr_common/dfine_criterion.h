// D-FINE's set loss (the reference's DFINECriterion), shared by DEIM (its DEIMCriterion: MAL in place
// of VFL): every output level is matched
// (Hungarian, D-FINE's cost form), and the box and distribution terms of every decoder level use the
// union of those matches (GO-LSD: per query, the target it was matched to on the most levels). The
// terms: VFL on each level's own matches; L1 and GIoU; FGL, a two-bin cross-entropy of each matched
// edge distribution around its target offset, weighted by the IoU; DDF, the KL divergence (at
// temperature 5) of each earlier layer's distributions from the last layer's, weighted by the
// teacher's confidence, matched and unmatched queries balanced. Denoising levels use their own
// positives and groups.
#pragma once

#include "models/detr_common/dfine_decoder.h"
#include "models/detr_common/matcher.h"
#include "models/loss_terms.h"

#include <ATen/Tensor.h>

#include <string>
#include <utility>
#include <vector>

namespace libreyolo::models::detr {

struct DfineCriterionOptions {
  std::int64_t classes = 80;
  double vfl_alpha = 0.75, vfl_gamma = 2.0;
  double vfl_weight = 1.0, l1_weight = 5.0, giou_weight = 2.0, fgl_weight = 0.15, ddf_weight = 1.5;
  std::int64_t reg_max = 32;
  double temperature = 5.0;
  MatchCost match{.dfine = true};
  // DEIM: MAL in place of VFL (loss_mal): the targets' IoU raised to mal_gamma as the score, matched
  // classes weighted 1 and the rest by p^mal_gamma
  bool mal = false;
  double mal_gamma = 1.5;
};

// One image's matches: query indices and the image's own target indices (int64, same length).
using ImageMatches = std::vector<std::pair<at::Tensor, at::Tensor>>;

// The GO-LSD union of `first` and `others` (per image: every level's pairs, each query kept once
// with the target it was paired with most often), computed with the reference's operations.
ImageMatches union_of_matches(const ImageMatches& first, const std::vector<ImageMatches>& others);

// The FGL targets of boxes `targets` (x1, y1, x2, y2) against reference boxes `points` (cx, cy, w,
// h): each edge's offset in units of W(n) as a bin position (clamped to [0, reg_max - 0.1]), and
// the weights of the bins to its right and left. Flattened, edge-major per box.
struct FdrTargets {
  at::Tensor bins, weight_right, weight_left;
};
FdrTargets fdr_targets(const at::Tensor& points, const at::Tensor& targets, std::int64_t reg_max, const at::Tensor& reg_scale,
                       const at::Tensor& up);

// Every weighted term under the reference's name (loss_vfl, loss_bbox, loss_giou, loss_fgl, and
// loss_ddf where a level has a teacher; suffixes _aux_<i>, _pre, _enc_0, _dn_<i>, _dn_pre), NaN
// read as 0. `up` and `reg_scale`: the decoder's. Data-parallel training passes `normaliser` (the
// global box counts) and `share` (the distillation's global edge and image counts), so that the
// ranks' averaged gradients equal one process's over the global batch.
std::vector<std::pair<std::string, at::Tensor>> dfine_loss_terms(const DfineOutputs& outputs, const DetrTargets& targets,
                                                                 const at::Tensor& up, const at::Tensor& reg_scale,
                                                                 const DfineCriterionOptions& options,
                                                                 const GlobalNormaliser& normaliser = {}, const GlobalShare& share = {});

// The total, and its parts summed over the levels as LibreYOLO shows them: vfl (DEIM: mal), bbox,
// giou, fgl, ddf.
LossTerms dfine_loss(const DfineOutputs& outputs, const DetrTargets& targets, const at::Tensor& up, const at::Tensor& reg_scale,
                     const DfineCriterionOptions& options, const GlobalNormaliser& normaliser = {}, const GlobalShare& share = {});

}  // namespace libreyolo::models::detr
