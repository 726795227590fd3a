#include "eval/classify_metrics.h"

#include "core/error.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <stdexcept>
#include <vector>

namespace libreyolo::eval {

ClassifyMetrics::ClassifyMetrics(int classes)
    : classes_(classes),
      true_positives_(at::zeros({classes}, at::kLong)),
      predicted_(at::zeros({classes}, at::kLong)),
      support_(at::zeros({classes}, at::kLong)) {}

int ClassifyMetrics::top_k() const { return std::min(5, classes_); }

void ClassifyMetrics::update(const at::Tensor& logits_in, const at::Tensor& targets_in) {
  const at::Tensor logits = logits_in.detach().to(at::kCPU, at::kFloat);
  const at::Tensor targets = targets_in.detach().to(at::kCPU, at::kLong).reshape({-1});
  const at::Tensor invalid = (targets < 0).logical_or(targets >= classes_);
  if (invalid.any().item<bool>()) {
    const at::Tensor labels = std::get<0>(at::_unique(targets.masked_select(invalid)));
    std::vector<std::int64_t> shown(labels.data_ptr<std::int64_t>(), labels.data_ptr<std::int64_t>() + std::min<std::int64_t>(8, labels.numel()));
    throw DataError(fmt::format("target labels {} are outside [0, {}] for a {}-class model: check the dataset's classes "
                                "against the model's", shown, classes_ - 1, classes_));
  }
  const at::Tensor topk = std::get<1>(logits.topk(top_k(), 1));  // [B, k]
  const at::Tensor correct = topk.eq(targets.unsqueeze(1));
  top1_correct_ += correct.select(1, 0).sum().item<std::int64_t>();
  top5_correct_ += correct.any(1).sum().item<std::int64_t>();
  total_ += targets.numel();
  const at::Tensor predicted = topk.select(1, 0);
  const at::Tensor ones = at::ones_like(targets);
  support_.index_add_(0, targets, ones);
  predicted_.index_add_(0, predicted, ones);
  const at::Tensor hit = targets.eq(predicted);
  true_positives_.index_add_(0, targets.masked_select(hit), ones.masked_select(hit));
}

double ClassifyMetrics::top1() const { return static_cast<double>(top1_correct_) / static_cast<double>(std::max<std::int64_t>(total_, 1)); }
double ClassifyMetrics::top5() const { return static_cast<double>(top5_correct_) / static_cast<double>(std::max<std::int64_t>(total_, 1)); }

ClassifyMetrics::Macro ClassifyMetrics::macro() const {
  if (total_ == 0) return {};
  const at::Tensor tp = true_positives_.to(at::kDouble), predicted = predicted_.to(at::kDouble), support = support_.to(at::kDouble);
  const at::Tensor present = support > 0;
  if (!present.any().item<bool>()) return {};
  const at::Tensor zeros = at::zeros_like(tp);
  const at::Tensor precision = at::where(predicted > 0, tp / predicted.clamp_min(1), zeros);
  const at::Tensor recall = at::where(support > 0, tp / support.clamp_min(1), zeros);
  const at::Tensor sum = precision + recall;
  const at::Tensor f1 = at::where(sum > 0, 2 * precision * recall / sum.clamp_min(1e-12), zeros);
  return {precision.masked_select(present).mean().item<double>(), recall.masked_select(present).mean().item<double>(),
          f1.masked_select(present).mean().item<double>()};
}

at::Tensor ClassifyMetrics::counts() const {
  const at::Tensor totals = at::tensor({total_, top1_correct_, top5_correct_}, at::kLong);
  return at::cat({totals, true_positives_, predicted_, support_}).to(at::kDouble);
}

void ClassifyMetrics::set_counts(const at::Tensor& counts) {
  const at::Tensor c = counts.to(at::kCPU, at::kDouble).round().to(at::kLong).contiguous();
  if (c.numel() != 3 + 3 * static_cast<std::int64_t>(classes_)) throw std::invalid_argument("ClassifyMetrics::set_counts: wrong size");
  const auto* v = c.data_ptr<std::int64_t>();
  total_ = v[0];
  top1_correct_ = v[1];
  top5_correct_ = v[2];
  true_positives_ = c.slice(0, 3, 3 + classes_).clone();
  predicted_ = c.slice(0, 3 + classes_, 3 + 2 * classes_).clone();
  support_ = c.slice(0, 3 + 2 * classes_).clone();
}

}  // namespace libreyolo::eval
