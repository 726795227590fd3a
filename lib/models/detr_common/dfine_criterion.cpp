#include "models/detr_common/dfine_criterion.h"

#include "core/error.h"
#include "core/step_part.h"
#include "models/box_ops.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <fmt/format.h>

#include <map>
#include <optional>

namespace libreyolo::models::detr {

namespace {

// The matched pairs of a level as the reference indexes them: (image, query) and the matched
// targets' boxes and classes, in image order.
struct Matched {
  at::Tensor image, query, boxes, classes;
};

Matched gather(const ImageMatches& matches, const DetrTargets& targets) {
  if (matches.size() != targets.counts.size()) {
    throw RuntimeError(fmt::format("D-FINE loss: matches for {} images, but the batch has {}", matches.size(), targets.counts.size()));
  }
  const auto device = targets.boxes.device();
  std::vector<at::Tensor> images, queries, boxes, classes;
  std::int64_t first = 0;
  for (std::size_t i = 0; i < matches.size(); ++i) {
    const at::Tensor query = matches[i].first.to(device), target = matches[i].second.to(device);
    images.push_back(at::full_like(query, static_cast<std::int64_t>(i)));
    queries.push_back(query);
    boxes.push_back(targets.boxes.narrow(0, first, targets.counts[i]).index_select(0, target));
    classes.push_back(targets.classes.narrow(0, first, targets.counts[i]).index_select(0, target));
    first += targets.counts[i];
  }
  return {at::cat(images), at::cat(queries), at::cat(boxes), at::cat(classes)};
}

ImageMatches from_assignments(const std::vector<Assignment>& assignments) {
  ImageMatches out;
  const auto options = at::TensorOptions().dtype(at::kLong);
  for (const auto& a : assignments) out.emplace_back(at::tensor(a.rows, options), at::tensor(a.cols, options));
  return out;
}

ImageMatches denoising_matches(const DenoisingMatch& match, const std::vector<std::int64_t>& counts) {
  ImageMatches out;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] > 0) {
      out.emplace_back(match.positive_queries.at(i).cpu(), at::arange(counts[i], at::kLong).tile({match.groups}));
    } else {
      out.emplace_back(at::zeros({0}, at::kLong), at::zeros({0}, at::kLong));
    }
  }
  return out;
}

at::Tensor corners(const at::Tensor& boxes) { return centre_size_to_corners(boxes, /*clamp_sizes=*/true); }

// D-FINE's IoU of matched pairs (no epsilon).
at::Tensor pair_iou(const at::Tensor& boxes, const at::Tensor& targets) { return detr_iou(corners(boxes), corners(targets), 0.0); }

at::Tensor varifocal(const at::Tensor& logits, const at::Tensor& boxes, const Matched& m, const at::Tensor& normaliser,
                     const DfineCriterionOptions& options) {
  const at::Tensor ious = pair_iou(boxes.index({m.image, m.query}), m.boxes).detach();
  const auto long_options = at::TensorOptions().dtype(at::kLong).device(logits.device());
  at::Tensor target_classes = at::full({logits.size(0), logits.size(1)}, options.classes, long_options);
  target_classes.index_put_({m.image, m.query}, m.classes);
  const at::Tensor one_hot = at::one_hot(target_classes, options.classes + 1).narrow(-1, 0, options.classes);
  at::Tensor score = at::zeros_like(target_classes, logits.options());
  score.index_put_({m.image, m.query}, ious.to(score.scalar_type()));
  at::Tensor target_score = score.unsqueeze(-1) * one_hot;
  const at::Tensor predicted = at::sigmoid(logits).detach();
  at::Tensor weight;
  if (options.mal) {  // DEIM's MAL (its mal_alpha unset)
    target_score = target_score.pow(options.mal_gamma);
    weight = predicted.pow(options.mal_gamma) * (1 - one_hot) + one_hot;
  } else {
    weight = options.vfl_alpha * predicted.pow(options.vfl_gamma) * (1 - one_hot) + target_score;
  }
  const at::Tensor loss = at::binary_cross_entropy_with_logits(logits, target_score, weight, {}, at::Reduction::None);
  return loss.mean(1).sum() * logits.size(1) / normaliser;
}

std::pair<at::Tensor, at::Tensor> box_terms(const at::Tensor& boxes, const Matched& m, const at::Tensor& normaliser) {
  const at::Tensor matched = boxes.index({m.image, m.query});
  const at::Tensor l1 = at::l1_loss(matched, m.boxes, at::Reduction::None).sum() / normaliser;
  const at::Tensor giou = (1 - generalized_iou(corners(matched), corners(m.boxes), 0.0)).sum() / normaliser;
  return {l1, giou};
}

// The cross-entropy of each distribution against its two neighbouring bins, weighted.
at::Tensor two_bin_loss(const at::Tensor& logits, const FdrTargets& t, const at::Tensor& weight, const at::Tensor& normaliser) {
  const at::Tensor left = t.bins.to(at::kLong), right = left + 1;
  at::Tensor loss = at::cross_entropy_loss(logits, left, {}, at::Reduction::None) * t.weight_left.reshape(-1) +
                    at::cross_entropy_loss(logits, right, {}, at::Reduction::None) * t.weight_right.reshape(-1);
  loss = loss * weight.to(at::kFloat);
  return loss.sum() / normaliser;
}

// The state a pass over the levels keeps, as the reference's criterion does between levels.
struct LocalState {
  std::optional<FdrTargets> targets, denoising_targets;
  at::Tensor positives, negatives;  // sqrt of the (batch-scaled) matched and unmatched counts, from the last matching level
};

struct Level {
  at::Tensor logits, boxes, corners, references;  // corners undefined: no distribution (pre, encoder)
  at::Tensor teacher_corners, teacher_logits;     // undefined: no teacher (the last layer)
  bool denoising = false;
};

void local_terms(std::vector<std::pair<std::string, at::Tensor>>& terms, const std::string& suffix, const Level& level,
                 const Matched& m, const at::Tensor& normaliser, const at::Tensor& up, const at::Tensor& reg_scale,
                 const DfineCriterionOptions& options, LocalState& state, const GlobalShare& share) {
  const StepPart part("fdr_loss");  // the distribution losses, a named phase in the profiler
  const std::int64_t bins = options.reg_max + 1;
  const at::Tensor predicted = level.corners.index({m.image, m.query}).reshape({-1, bins});
  const at::Tensor references = level.references.index({m.image, m.query}).detach();
  auto& cached = level.denoising ? state.denoising_targets : state.targets;
  if (!cached) {
    at::NoGradGuard no_grad;
    cached = fdr_targets(references, corners(m.boxes), options.reg_max, reg_scale, up);
  }
  const at::Tensor ious = pair_iou(level.boxes.index({m.image, m.query}), m.boxes);
  const at::Tensor weight = ious.unsqueeze(-1).repeat({1, 1, 4}).reshape(-1).detach();
  terms.emplace_back("loss_fgl" + suffix, two_bin_loss(predicted, *cached, weight, normaliser) * options.fgl_weight);
  if (!level.teacher_corners.defined()) return;
  const at::Tensor all = level.corners.reshape({-1, bins}), teacher = level.teacher_corners.reshape({-1, bins});
  at::Tensor confidence = std::get<0>(level.teacher_logits.sigmoid().max(-1));
  at::Tensor mask = at::zeros_like(confidence, at::kBool);
  mask.index_put_({m.image, m.query}, at::scalar_tensor(true, mask.options()));
  mask = mask.unsqueeze(-1).repeat({1, 1, 4}).reshape(-1);
  at::Tensor counts;
  if (share) {
    // data-parallel: the matched and unmatched edges' and the images' counts over the global batch
    // (each / world size), one collective, on every rank and for every teacher level alike (before
    // the branch below, whose outcome is each rank's own)
    const at::Tensor images = at::scalar_tensor(static_cast<double>(level.boxes.size(0)), mask.sum().options().dtype(at::kFloat));
    counts = share(at::stack({mask.sum().to(at::kFloat), (~mask).sum().to(at::kFloat), images}));
  }
  at::Tensor ddf;
  if (at::equal(all, teacher)) {
    ddf = all.sum() * 0;
  } else {
    confidence.index_put_({m.image, m.query}, ious.reshape_as(confidence.index({m.image, m.query})).to(confidence.scalar_type()));
    confidence = confidence.unsqueeze(-1).repeat({1, 1, 4}).reshape(-1).detach();
    const double t = options.temperature;
    const at::Tensor divergence = at::kl_div(at::log_softmax(all / t, 1), at::softmax(teacher.detach() / t, 1), at::Reduction::None);
    const at::Tensor per_edge = confidence * (t * t) * divergence.sum(-1);
    at::Tensor matched, unmatched;
    if (!share) {  // one process: the reference's arithmetic
      if (!level.denoising) {
        const double batch_scale = 8.0 / static_cast<double>(level.boxes.size(0));
        state.positives = (mask.sum() * batch_scale).pow(0.5);
        state.negatives = ((~mask).sum() * batch_scale).pow(0.5);
      }
      const at::Tensor zero = at::zeros({}, per_edge.options());
      matched = mask.any().item<bool>() ? per_edge.index({mask}).mean() : zero;
      unmatched = (~mask).any().item<bool>() ? per_edge.index({~mask}).mean() : zero;
    } else {  // each rank's sums over the global counts, averaged by the gradient's all-reduce: one process's means
      if (!level.denoising) {
        state.positives = (counts[0] * 8.0 / counts[2]).pow(0.5);
        state.negatives = (counts[1] * 8.0 / counts[2]).pow(0.5);
      }
      matched = per_edge.masked_select(mask).sum() / counts[0].clamp_min(1e-12);  // no edge: a sum of none, 0
      unmatched = per_edge.masked_select(~mask).sum() / counts[1].clamp_min(1e-12);
    }
    if (!state.positives.defined()) throw RuntimeError("D-FINE loss: a denoising level's DDF before any matching level's");
    ddf = (matched * state.positives + unmatched * state.negatives) / (state.positives + state.negatives);
  }
  terms.emplace_back("loss_ddf" + suffix, ddf * options.ddf_weight);
}

void level_terms(std::vector<std::pair<std::string, at::Tensor>>& terms, const std::string& suffix, const Level& level,
                 const DetrTargets& targets, const ImageMatches& own, const ImageMatches& shared, const at::Tensor& boxes_normaliser,
                 const at::Tensor& shared_normaliser, const at::Tensor& up, const at::Tensor& reg_scale,
                 const DfineCriterionOptions& options, LocalState& state, const GlobalShare& share) {
  const Matched own_matched = gather(own, targets);
  terms.emplace_back((options.mal ? "loss_mal" : "loss_vfl") + suffix,
                     varifocal(level.logits, level.boxes, own_matched, boxes_normaliser, options) * options.vfl_weight);
  const Matched matched = gather(shared, targets);
  const auto [l1, giou] = box_terms(level.boxes, matched, shared_normaliser);
  terms.emplace_back("loss_bbox" + suffix, l1 * options.l1_weight);
  terms.emplace_back("loss_giou" + suffix, giou * options.giou_weight);
  if (level.corners.defined()) local_terms(terms, suffix, level, matched, shared_normaliser, up, reg_scale, options, state, share);
}

Level fdr_level(const FdrLevel& level) {
  return {level.logits.to(at::kFloat), level.boxes.to(at::kFloat), level.corners.to(at::kFloat), level.references.to(at::kFloat), {}, {}};
}

Level plain_level(const DetrLevel& level) { return {level.logits.to(at::kFloat), level.boxes.to(at::kFloat), {}, {}, {}, {}}; }

}  // namespace

ImageMatches union_of_matches(const ImageMatches& first, const std::vector<ImageMatches>& others) {
  ImageMatches indices = first;
  for (const auto& other : others) {
    ImageMatches joined;
    for (std::size_t i = 0; i < indices.size(); ++i) {
      joined.emplace_back(at::cat({indices[i].first, other.at(i).first}), at::cat({indices[i].second, other.at(i).second}));
    }
    indices = std::move(joined);
  }
  std::vector<at::Tensor> rows;
  for (std::size_t i = 0; i < indices.size(); ++i) {
    rows.push_back(at::stack({at::full_like(indices[i].first, static_cast<std::int64_t>(i)), indices[i].first, indices[i].second}, 1));
  }
  const auto [unique, inverse, counts] = at::unique_dim(at::cat(rows), 0, /*sorted=*/true, /*return_inverse=*/false, /*return_counts=*/true);
  const at::Tensor segments = at::bincount(unique.select(1, 0), {}, static_cast<std::int64_t>(indices.size())).contiguous();
  std::vector<at::Tensor> sorted;
  std::int64_t offset = 0;
  for (std::int64_t i = 0; i < segments.numel(); ++i) {
    const std::int64_t size = segments[i].item<std::int64_t>();
    const at::Tensor order = at::argsort(counts.narrow(0, offset, size), -1, /*descending=*/true);
    sorted.push_back(unique.narrow(0, offset, size).narrow(1, 1, 2).index_select(0, order));
    offset += size;
  }
  const at::Tensor pairs = at::cat(sorted).contiguous();
  const std::int64_t* p = pairs.data_ptr<std::int64_t>();
  ImageMatches out;
  offset = 0;
  for (std::int64_t i = 0; i < segments.numel(); ++i) {
    const std::int64_t size = segments[i].item<std::int64_t>();
    std::vector<std::int64_t> queries, targets;  // each query once, with its first (most frequent) target
    std::map<std::int64_t, bool> seen;
    for (std::int64_t k = offset; k < offset + size; ++k) {
      if (seen.emplace(p[2 * k], true).second) {
        queries.push_back(p[2 * k]);
        targets.push_back(p[2 * k + 1]);
      }
    }
    offset += size;
    out.emplace_back(at::tensor(queries, at::kLong), at::tensor(targets, at::kLong));
  }
  return out;
}

FdrTargets fdr_targets(const at::Tensor& points, const at::Tensor& boxes, std::int64_t reg_max, const at::Tensor& reg_scale_in,
                       const at::Tensor& up) {
  const at::Tensor reg_scale = reg_scale_in.abs();
  const auto p = [&](std::int64_t i) { return points.select(-1, i); };
  const auto b = [&](std::int64_t i) { return boxes.select(-1, i); };
  const at::Tensor left = (p(0) - b(0)) / (p(2) / reg_scale + 1e-16) - 0.5 * reg_scale;
  const at::Tensor top = (p(1) - b(1)) / (p(3) / reg_scale + 1e-16) - 0.5 * reg_scale;
  const at::Tensor right = (b(2) - p(0)) / (p(2) / reg_scale + 1e-16) - 0.5 * reg_scale;
  const at::Tensor bottom = (b(3) - p(1)) / (p(3) / reg_scale + 1e-16) - 0.5 * reg_scale;
  // each offset between two values of W(n): its left bin, and the weights of both neighbours
  const at::Tensor gt = at::stack({left, top, right, bottom}, -1).reshape(-1);
  const at::Tensor values = fdr_weighting(reg_max, up, reg_scale);
  const at::Tensor below = (values.unsqueeze(0) - gt.unsqueeze(1)) <= 0;
  at::Tensor index = (below.sum(1) - 1).to(at::kFloat);
  const at::Tensor valid = (index >= 0) & (index < reg_max);
  const at::Tensor at_left = index.clamp(0, static_cast<double>(reg_max - 1)).to(at::kLong);
  const at::Tensor left_diff = (gt - values.index_select(0, at_left)).abs();
  const at::Tensor right_diff = (values.index_select(0, at_left + 1) - gt).abs();
  at::Tensor weight_right = at::where(valid, left_diff / (left_diff + right_diff), at::zeros_like(index));
  at::Tensor weight_left = at::where(valid, 1.0 - weight_right, at::zeros_like(index));
  const at::Tensor under = index < 0;
  weight_right = at::where(under, at::zeros_like(index), weight_right);
  weight_left = at::where(under, at::ones_like(index), weight_left);
  index = at::where(under, at::zeros_like(index), index);
  const at::Tensor over = index >= reg_max;
  weight_right = at::where(over, at::ones_like(index), weight_right);
  weight_left = at::where(over, at::zeros_like(index), weight_left);
  index = at::where(over, at::full_like(index, static_cast<double>(reg_max) - 0.1), index);
  return {index.clamp(0.0, static_cast<double>(reg_max) - 0.1).reshape(-1).detach(), weight_right.detach(), weight_left.detach()};
}

std::vector<std::pair<std::string, at::Tensor>> dfine_loss_terms(const DfineOutputs& outputs, const DetrTargets& targets,
                                                                 const at::Tensor& up, const at::Tensor& reg_scale,
                                                                 const DfineCriterionOptions& options,
                                                                 const GlobalNormaliser& normaliser, const GlobalShare& share) {
  // the levels in the reference's order: the last layer, the earlier ones, pre, the encoder's
  Level last = fdr_level(outputs.last);
  std::vector<Level> auxiliary;
  for (const auto& level : outputs.auxiliary) {
    auxiliary.push_back(fdr_level(level));
    auxiliary.back().teacher_corners = last.corners;
    auxiliary.back().teacher_logits = last.logits;
  }
  const Level pre = plain_level(outputs.pre), encoder = plain_level(outputs.encoder);
  // every level matched on its own
  std::vector<ImageMatches> matches;
  {
    const StepPart part("matcher");  // a named phase in the profiler
    std::vector<const Level*> matched_levels{&last};
    for (const auto& level : auxiliary) matched_levels.push_back(&level);
    matched_levels.push_back(&pre);
    matched_levels.push_back(&encoder);
    for (const Level* level : matched_levels) matches.push_back(from_assignments(match(level->logits, level->boxes, targets, options.match)));
  }
  const std::vector<ImageMatches> others(matches.begin() + 1, matches.end());
  const ImageMatches shared = union_of_matches(matches.front(), others);
  const auto device = last.logits.device();
  std::int64_t shared_count = 0;
  for (const auto& [queries, unused] : shared) shared_count += queries.size(0);
  const auto count = [&](double value) { return at::scalar_tensor(value, at::TensorOptions().dtype(at::kFloat).device(device)); };
  const at::Tensor shared_boxes = loss_normaliser(count(static_cast<double>(shared_count)), normaliser);
  const at::Tensor boxes = loss_normaliser(count(static_cast<double>(targets.total())), normaliser);

  std::vector<std::pair<std::string, at::Tensor>> terms;
  LocalState state;
  level_terms(terms, "", last, targets, matches[0], shared, boxes, shared_boxes, up, reg_scale, options, state, share);
  for (std::size_t i = 0; i < auxiliary.size(); ++i) {
    level_terms(terms, fmt::format("_aux_{}", i), auxiliary[i], targets, matches[1 + i], shared, boxes, shared_boxes, up, reg_scale,
                options, state, share);
  }
  level_terms(terms, "_pre", pre, targets, matches[1 + auxiliary.size()], shared, boxes, shared_boxes, up, reg_scale, options,
              state, share);
  level_terms(terms, "_enc_0", encoder, targets, matches[2 + auxiliary.size()], shared, boxes, shared_boxes, up, reg_scale, options,
              state, share);
  if (!outputs.denoising.empty()) {
    const ImageMatches denoising = denoising_matches(outputs.denoising_match, targets.counts);
    const at::Tensor denoising_boxes = outputs.denoising_match.groups > 0 ? boxes * outputs.denoising_match.groups : count(1.0);
    const Level teacher = fdr_level(outputs.denoising.back());
    for (std::size_t i = 0; i < outputs.denoising.size(); ++i) {
      Level level = fdr_level(outputs.denoising[i]);
      level.denoising = true;
      level.teacher_corners = teacher.corners;
      level.teacher_logits = teacher.logits;
      level_terms(terms, fmt::format("_dn_{}", i), level, targets, denoising, denoising, denoising_boxes, denoising_boxes, up,
                  reg_scale, options, state, share);
    }
    Level level = plain_level(outputs.denoising_pre);
    level.denoising = true;
    level_terms(terms, "_dn_pre", level, targets, denoising, denoising, denoising_boxes, denoising_boxes, up, reg_scale, options,
                state, share);
  }
  for (auto& [name, value] : terms) value = at::nan_to_num(value, 0.0);
  return terms;
}

LossTerms dfine_loss(const DfineOutputs& outputs, const DetrTargets& targets, const at::Tensor& up, const at::Tensor& reg_scale,
                     const DfineCriterionOptions& options, const GlobalNormaliser& normaliser, const GlobalShare& share) {
  const auto terms = dfine_loss_terms(outputs, targets, up, reg_scale, options, normaliser, share);
  LossTerms result;
  std::map<std::string, at::Tensor> parts;
  const auto add = [](at::Tensor& sum, const at::Tensor& term) { sum = sum.defined() ? sum + term : term; };
  const std::vector<std::string> names{options.mal ? "mal" : "vfl", "bbox", "giou", "fgl", "ddf"};
  for (const auto& [name, value] : terms) {
    add(result.total, value);
    for (const auto& part : names) {
      if (name.starts_with("loss_" + part)) add(parts[part], value);
    }
  }
  for (const auto& part : names) {
    result.parts.emplace_back(part, parts.count(part) ? parts[part].detach() : at::zeros({}));
  }
  return result;
}

}  // namespace libreyolo::models::detr
