// Where a training run stands: the epoch and the batch inside it, optimizer steps, the best
// metric so far and the running loss sums of the epoch. It writes itself into a checkpoint and
// reads itself back, so a resumed run continues exactly (the partial epoch's means included).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace libreyolo::models {
struct Checkpoint;
}

namespace libreyolo::train {

struct TrainState {
  // fixed for the run
  int epochs = 0;
  std::int64_t batches_per_epoch = 0;
  std::int64_t accumulate = 1;    // micro-batches per optimizer step (nbs)
  std::vector<std::string> loss_names;

  // position
  int start_epoch = 0;            // the first epoch this process trains (0-based)
  std::int64_t start_batch = 0;   // batches of start_epoch already done by a resumed run
  int epoch = 0;                  // current epoch, 0-based
  std::int64_t batch = 0;         // batches done in the current epoch
  std::int64_t optimizer_steps = 0;

  // best so far: `metric_name` (best_metric=, metrics/mAP50-95 by default) selects best.pt
  std::string metric_name = "metrics/mAP50-95";
  double best_metric = -1;                     // its value at the best epoch
  double best_map50 = -1, best_map50_95 = -1;  // the best epoch's mAPs
  int best_epoch = 0;             // 1-based; 0 = none yet

  // running sums of the epoch's logged losses
  std::vector<double> loss_sums;
  double total_sum = 0;
  std::int64_t seen = 0;
  double last_epoch_loss = std::nan("");
  double epoch_seconds = 0, data_share = 0;  // the last epoch's time and share spent waiting for data
  double train_seconds = 0;  // the run's training time so far, across resumes (saved in checkpoints)

  std::int64_t steps_per_epoch() const { return (batches_per_epoch + accumulate - 1) / accumulate; }
  // The accumulation window of the next batch (batch = the batches done): its first batch and length.
  std::int64_t window_start() const { return (batch / accumulate) * accumulate; }
  std::int64_t window_length() const { return std::min(accumulate, batches_per_epoch - window_start()); }

  void reset_epoch_sums();
  // `steps` micro-steps' logged values at once: their sums.
  void add_loss_sums(double total, const std::vector<double>& parts, std::int64_t steps);
  std::vector<double> loss_means() const;

  // Writes epoch / position / best / partial sums into `checkpoint`'s extras; `epoch_done` is the
  // last finished epoch (0-based, -1 for none), `batches_done` the position inside the next one.
  void write(models::Checkpoint& checkpoint, int epoch_done, std::int64_t batches_done) const;
  // A resumed run's position, best metric and partial sums. `accumulate` and `batches_per_epoch` first.
  void read(const models::Checkpoint& checkpoint);
};

}  // namespace libreyolo::train
