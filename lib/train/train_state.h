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
  // YOLOv5's nominal batch (train.py) instead of LibreYOLO's fixed windows: over the first
  // `ramp_batches` batches the window grows from 1 batch to nbs / batch (`nominal_ratio`, rounded);
  // a window ends at the first batch n with n - last_step >= its size, so windows run on across
  // epochs, though each epoch starts with zeroed gradients; the losses add up undivided, and the
  // schedule counts batches (its lr at a step is that of the step's batch).
  bool ramp = false;
  std::int64_t ramp_batches = 0;
  double nominal_ratio = 1;
  double weight_decay_scale = 1;  // ramp: global batch x accumulate / nbs
  std::vector<std::string> loss_names;

  // position
  int start_epoch = 0;            // the first epoch this process trains (0-based)
  std::int64_t start_batch = 0;   // batches of start_epoch already done by a resumed run
  int epoch = 0;                  // current epoch, 0-based
  std::int64_t batch = 0;         // batches done in the current epoch
  std::int64_t optimizer_steps = 0;
  std::int64_t last_step = -1;    // ramp: the global batch index of the last optimizer step

  // best so far: `metric_name` (best_metric=, the task's column by default: set_up_training) selects best.pt
  std::string metric_name;
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

  // The schedule's iterations per epoch: optimizer steps, or batches under the ramp.
  std::int64_t steps_per_epoch() const { return ramp ? batches_per_epoch : (batches_per_epoch + accumulate - 1) / accumulate; }
  // The accumulation window of the next batch (batch = the batches done): its first batch and length
  // (LibreYOLO's windows, which restart with every epoch).
  std::int64_t window_start() const { return (batch / accumulate) * accumulate; }
  std::int64_t window_length() const { return std::min(accumulate, batches_per_epoch - window_start()); }
  std::int64_t global_batch() const { return epoch * batches_per_epoch + batch; }
  // nbs= (batches_per_epoch first): accumulate = max(1, round(nbs / global batch)), Python's round
  // (half to even); with `ramp`, YOLOv5's windows over the warm-up's max(round(warmup_epochs x
  // batches_per_epoch), 100) batches (none without a warm-up) and its weight_decay_scale.
  void set_nominal_batch(std::int64_t nbs, std::int64_t global_batch_size, double warmup_epochs, bool ramp_windows);
  // The ramp's window size at global batch n: max(1, round(interp(n, [0, ramp_batches], [1, nominal_ratio]))).
  std::int64_t accumulate_at(std::int64_t n) const;
  // The ramp: the global batch whose optimizer step follows the one at `last` (-1: none yet).
  std::int64_t next_step_after(std::int64_t last) const;
  // Whether the next batch opens a window (its gradients start from zero) or closes one (an optimizer step follows).
  bool window_begins() const;
  bool window_ends() const;
  // What the next batch's loss is divided by: the window's length, or 1 under the ramp.
  double loss_divisor() const;
  // The schedule's iteration for the next optimizer step.
  std::int64_t schedule_iteration() const { return ramp ? next_step_after(last_step) : optimizer_steps; }
  // An optimizer step after the batch just counted (++batch first).
  void record_step() {
    ++optimizer_steps;
    last_step = global_batch() - 1;
  }

  void reset_epoch_sums();
  // `steps` micro-steps' logged values at once: their sums.
  void add_loss_sums(double total, const std::vector<double>& parts, std::int64_t steps);
  std::vector<double> loss_means() const;

  // Writes epoch / position / best / partial sums into `checkpoint`'s extras; `epoch_done` is the
  // last finished epoch (0-based, -1 for none), `batches_done` the position inside the next one.
  void write(models::Checkpoint& checkpoint, int epoch_done, std::int64_t batches_done) const;
  // A resumed run's position, best metric and partial sums. `accumulate` and `batches_per_epoch` first.
  void read(const models::Checkpoint& checkpoint);
  // optimizer_steps (and last_step) as they stood at start_epoch / start_batch.
  void restore_steps();
};

}  // namespace libreyolo::train
