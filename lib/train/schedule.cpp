#include "train/schedule.h"

#include "core/error.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numbers>

namespace libreyolo::train {

int strong_augmentation_stop(int epochs, int no_aug_epochs, double ratio) {
  const int stop = epochs - no_aug_epochs;
  if (ratio >= 1.0) return stop;
  const int by_ratio = static_cast<int>(epochs * ratio);
  return no_aug_epochs > 0 ? std::min(by_ratio, std::max(1, stop)) : by_ratio;
}

Schedule::Schedule(ScheduleOptions options) : options_(std::move(options)) {
  if (options_.kind == "warmcos") options_.kind = "cos";
  static constexpr const char* kinds[] = {"yoloxwarmcos", "linear", "linear_epoch", "cos", "flat_cosine", "constant"};
  if (std::find(std::begin(kinds), std::end(kinds), options_.kind) == std::end(kinds)) {
    throw UsageError(fmt::format("scheduler={} is not one of yoloxwarmcos, linear, linear_epoch, cos, flat_cosine, constant", options_.kind));
  }
  warmup_iters_ = static_cast<double>(options_.steps_per_epoch) * options_.warmup_epochs;
  if (options_.kind == "linear_epoch" && options_.warmup_epochs > 0) warmup_iters_ = std::max(std::round(warmup_iters_), 100.0);
  warmup_start_ = std::min(options_.warmup_lr_start, options_.lr0);
  min_lr_ = options_.lr0 * options_.min_lr_ratio;
  total_iters_ = options_.steps_per_epoch * options_.epochs;
}

bool Schedule::warming_up(std::int64_t iteration) const {
  return warmup_iters_ > 0 && static_cast<double>(iteration) <= warmup_iters_;
}

double Schedule::lr(std::int64_t iteration) const { return lr(iteration, warmup_start_); }

double Schedule::lr(std::int64_t iteration, double warmup_start) const {
  const double it = static_cast<double>(iteration), lr0 = options_.lr0, total = static_cast<double>(total_iters_);
  const double linear_warmup = warmup_iters_ > 0 ? (lr0 - warmup_start) * it / warmup_iters_ + warmup_start : lr0;
  const std::string& kind = options_.kind;
  if (kind == "linear_epoch") {
    const double epoch = static_cast<double>(iteration / std::max<std::int64_t>(1, options_.steps_per_epoch));
    const double ratio = options_.min_lr_ratio;
    const double target = lr0 * ((1.0 - epoch / options_.epochs) * (1.0 - ratio) + ratio);
    if (warming_up(iteration)) return warmup_start + (target - warmup_start) * it / warmup_iters_;
    return target;
  }
  if (kind == "yoloxwarmcos") {
    const double plateau = static_cast<double>(options_.steps_per_epoch * options_.no_aug_epochs);
    if (warmup_iters_ > 0 && it <= warmup_iters_) return (lr0 - warmup_start) * std::pow(it / warmup_iters_, 2) + warmup_start;
    if (it >= total - plateau) return min_lr_;
    return min_lr_ + 0.5 * (lr0 - min_lr_) *
                         (1.0 + std::cos(std::numbers::pi * (it - warmup_iters_) / (total - warmup_iters_ - plateau)));
  }
  if (kind == "constant") return warmup_iters_ > 0 && it <= warmup_iters_ ? linear_warmup : lr0;
  if (it <= warmup_iters_) return linear_warmup;
  if (kind == "flat_cosine") {
    const double cosine = std::min(static_cast<double>(options_.steps_per_epoch * options_.no_aug_epochs),
                                   std::max(0.0, total - warmup_iters_));
    const double start = total - cosine;
    if (it < start) return lr0;
    const double progress = std::min(1.0, (it - start) / std::max(1.0, cosine));
    return min_lr_ + 0.5 * (lr0 - min_lr_) * (1 + std::cos(std::numbers::pi * progress));
  }
  const double progress = (it - warmup_iters_) / std::max(1.0, total - warmup_iters_);
  if (kind == "linear") return lr0 - (lr0 - min_lr_) * progress;
  return min_lr_ + 0.5 * (lr0 - min_lr_) * (1 + std::cos(std::numbers::pi * progress));  // cos
}

std::optional<double> Schedule::momentum(std::int64_t iteration) const {
  if ((options_.kind != "linear" && options_.kind != "linear_epoch") || !options_.warmup_momentum) return std::nullopt;
  const double it = static_cast<double>(iteration);
  if (warmup_iters_ <= 0 || it >= warmup_iters_) return options_.momentum;
  return *options_.warmup_momentum + (options_.momentum - *options_.warmup_momentum) * (it / warmup_iters_);
}

}  // namespace libreyolo::train
