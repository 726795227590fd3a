// Per-iteration learning-rate (and YOLOv9 momentum-warmup) schedules, as LibreYOLO steps them:
// lr(iteration) is applied after each optimizer step with iteration+1, and at start or resume
// with start_epoch × steps_per_epoch.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace libreyolo::train {

struct ScheduleOptions {
  // yoloxwarmcos | linear | linear_epoch | cos (warmcos) | flat_cosine | constant. linear_epoch is
  // YOLOv5's and Ultralytics' LambdaLR: lr0 x lf(epoch), lf(e) = (1 - e/epochs)(1 - min_lr_ratio) +
  // min_lr_ratio, held for the epoch, after a per-iteration warmup over max(warmup_epochs x
  // steps_per_epoch, 100) iterations towards that epoch's rate.
  std::string kind = "yoloxwarmcos";
  double lr0 = 0.01;
  double warmup_epochs = 5;
  double warmup_lr_start = 0.0;       // clamped to ≤ lr0
  double min_lr_ratio = 0.05;
  int no_aug_epochs = 15;             // yoloxwarmcos plateau, flat_cosine cosine tail
  std::int64_t steps_per_epoch = 1;
  int epochs = 300;
  std::optional<double> warmup_momentum;  // linear and linear_epoch only: momentum lerps to `momentum`
  double momentum = 0.937;
};

// The first epoch without the strong augmentations: where the `no_aug_epochs` begin, or, for a
// ratio below 1, LibreYOLO's DETR rule min(int(epochs x ratio), max(1, epochs - no_aug_epochs)).
int strong_augmentation_stop(int epochs, int no_aug_epochs, double ratio);

class Schedule {
 public:
  // Throws UsageError for an unknown kind.
  explicit Schedule(ScheduleOptions options);
  double lr(std::int64_t iteration) const;
  // The rate of a group that warms up from `warmup_start` instead (warmup_bias_lr: YOLOv5's biases
  // start at 0.1 and fall to the schedule's rate); lr(iteration) after the warmup.
  double lr(std::int64_t iteration, double warmup_start) const;
  // Whether `iteration` is within the warmup.
  bool warming_up(std::int64_t iteration) const;
  // Momentum for this iteration, or nothing when the schedule leaves momentum alone.
  std::optional<double> momentum(std::int64_t iteration) const;
  const ScheduleOptions& options() const { return options_; }

 private:
  ScheduleOptions options_;
  double warmup_iters_;
  double warmup_start_;
  double min_lr_;
  std::int64_t total_iters_;
};

}  // namespace libreyolo::train
