// The loop (see trainer.h for its shape): the Trainer (trainer_loop.h) and its epoch and step stages;
// its end-of-epoch stages are in trainer_epoch_end.cpp, its helpers in loop_parts.cpp, and
// setup.cpp (what the loop works on), step_runner.cpp (one micro-step), checkpoints.cpp.
#include "train/trainer.h"

#include "core/error.h"
#include "core/log.h"
#include "cuda/cuda_info.h"
#include "train/amp.h"
#include "train/capturable_optimizer.h"
#include "train/checkpoints.h"
#include "train/optimizer.h"
#include "train/precise_bn.h"
#include "train/progress.h"
#include "train/rank_agreement.h"
#include "train/trainer_loop.h"
#include "train/contention.h"
#include "train/signal_stop.h"
#include "train/step_losses.h"
#include "train/step_runner.h"
#include "train/weight_average.h"
#include "eval/plots.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <random>
#include <map>
#include <cmath>

namespace libreyolo::train {

const char* phase_name(Phase phase) {
  switch (phase) {
    case Phase::to_device: return "to_device";
    case Phase::forward: return "forward";
    case Phase::backward: return "backward";
    case Phase::optimizer: return "optimizer";
  }
  return "?";
}

namespace loop {




// Reloads the last good state (last.pt of this run, else the starting state) and runs the epoch
// again at half the learning rate: the same state, data and step size would diverge the same way
// (the data order and augmentation are drawn from (seed, epoch)). A fourth divergence ends the run.
void Trainer::recover(const Divergence& divergence) {
  const bool from_last = record_.has_own_last();
  if (++recoveries_ > 3) {
    throw RuntimeError(fmt::format("training diverged again after 3 recoveries, the last at {}x the learning rate ({}); "
                                   "{}. Lower lr0 further{}",
                                   t_.optim.lr_scale, divergence.what(),
                                   from_last ? fmt::format("{} holds the last good weights", record_.last().string())
                                             : std::string("no checkpoint was written"),
                                   // float32 already: mixed precision is not the cause to rule out
                                   t_.precision.autocast ? ", check the labels, or train in float32 (amp=false)" : " or check the labels"));
  }
  const double lr_scale = t_.optim.lr_scale * 0.5;
  log::warn("{}: reloading {} and training on at half the learning rate (lr x{} from now on; recovery {}/3)",
            divergence.what(), from_last ? record_.last().string() : std::string("the starting weights"), lr_scale,
            recoveries_);
  const models::Checkpoint good = from_last ? models::read_checkpoint(record_.last()) : *start_;
  t_.optim.optimizer->state().clear();  // a checkpoint written before the first step holds none
  if (auto* capturable = dynamic_cast<CapturableOptimizer*>(t_.optim.optimizer.get())) capturable->state_loaded();
  load_run_state(t_, state_, good, /*weights=*/true);
  t_.optim.lr_scale = lr_scale;  // not the reloaded checkpoint's
  runner_.state_replaced("recovering from a divergence: new optimizer state");
  t_.optim.apply_schedule(state_.schedule_iteration());
  state_.epoch = state_.start_epoch;
}

void Trainer::begin_epoch() {
  const int epoch = state_.epoch;
  const int stop = t_.inputs.augmentation_stop_epoch;
  const bool close_mosaic = epoch >= stop;
  data::TrainingAugmentation& pipeline = *t_.inputs.data.pipeline;
  pipeline.set_strong_enabled(!close_mosaic);
  if (close_mosaic) {
    const std::string loss_change = t_.net.loss->close_augmentation();
    if (epoch == stop && !pipeline.strong_stage().empty()) {
      log::info("Closing {} for the last {} epochs{}", pipeline.strong_stage(), state_.epochs - stop,
                loss_change.empty() ? "" : fmt::format(" ({})", loss_change));
    }
  }
  // LibreYOLO's D-FINE and DEIM: a constant EMA decay from where the no-augmentation epochs begin
  // (also on a resume past it)
  if (t_.net.ema && t_.inputs.ema_restart_epoch >= 0 && epoch >= t_.inputs.ema_restart_epoch && !t_.net.ema->restarted()) {
    t_.net.ema->restart(t_.inputs.ema_restart_decay);
    log::info("EMA restart: a constant decay of {:g} for the last {} epochs", t_.inputs.ema_restart_decay,
              state_.epochs - t_.inputs.ema_restart_epoch);
  }
  t_.net.set_train_mode();
  state_.batch = epoch == state_.start_epoch ? state_.start_batch : 0;
  t_.inputs.loader->start_epoch(epoch, static_cast<std::size_t>(state_.batch));
  if (state_.batch == 0) state_.reset_epoch_sums();
  progress_.print_header();
  shown_ = {};
}

void Trainer::train_batches() {
  EpochClock clock;
  // LIBREYOLO_CUDA_SYNC_WARN=1: every host sync of the batches warns (a test counts them)
  const SyncWarnings sync_warnings(t_.place.device.is_cuda() && std::getenv("LIBREYOLO_CUDA_SYNC_WARN") != nullptr);
  while (auto batch = fetch(t_, hooks_, clock)) {
    const bool window_end = state_.window_ends();
    hooks_.on_step_start(state_);
    micro_step(*batch, clock);
    hooks_.on_step_end(state_);
    stop_ = ranks_.stop(hooks_.should_stop(state_));
    if (stop_ && (stop_->kind == StopRequest::Kind::finish || window_end)) break;
    stop_.reset();  // an interrupt waits for the end of the accumulation window
  }
  if (!losses_.empty()) {  // the epoch's (or the stop's) last steps, before anything is written
    read_losses(state_.batch);
    shown_.losses = state_.loss_means();
  }
  if (shown_.total) progress_.finish(shown_);
  state_.epoch_seconds = clock.elapsed();
  state_.data_share = clock.data_share();
}

// The pending steps' logged values, in one transfer: averaged over the ranks (every rank judges
// the same numbers), checked for divergence, added to the epoch's means.
// `last_batch`: the 1-based batch of the epoch the newest pending step trained.
void Trainer::read_losses(std::int64_t last_batch) {
  const std::int64_t first = last_batch + 1 - losses_.pending(), last = last_batch;
  StepLosses::Values read = losses_.read();
  std::vector<double> values = read.sums;
  values.push_back(read.gradients_finite ? 1.0 : 0.0);
  ranks_.mean(values);  // a gradient flag below 1: some rank's gradients are not finite
  const std::string where = first == last ? fmt::format("at epoch {}, batch {}", state_.epoch + 1, last)
                                          : fmt::format("at epoch {}, batches {}-{}", state_.epoch + 1, first, last);
  if (!std::isfinite(values[0])) {
    throw Divergence(fmt::format("the loss is {} {}", std::isnan(values[0]) ? "nan" : fmt::format("{}", values[0]), where));
  }
  if (values.back() < 1) throw Divergence(fmt::format("non-finite gradients {}", where));
  values.pop_back();
  state_.add_loss_sums(values[0], {values.begin() + 1, values.end()}, read.steps);
}

void Trainer::micro_step(const data::Batch& batch, EpochClock& clock) {
  const bool window_end = state_.window_ends();
  if (state_.window_begins()) runner_.begin_window();
  at::Tensor x;
  models::TargetBatch targets;
  {
    const auto phase = hooks_.phase(Phase::to_device);
    x = network_input(t_, batch.images, state_);
    targets = t_.task->loss_targets(batch.targets, x, runner_.label_slots(), t_.place.device);
    // the images were copied non_blocking: their pinned buffer is recycled once the copy is done
    if (t_.place.device.is_cuda()) t_.inputs.loader->release_after(batch.images, cuda::completion_marker(t_.place.device.index()));
  }
  const models::LossTerms terms = runner_.run(x, targets, state_.loss_divisor());
  // a float16 loss scaler skips steps with overflowed gradients itself; otherwise they are divergence
  const at::Tensor grads_ok = window_end && !t_.precision.scaler->enabled() ? gradients_finite(*t_.net.model().module) : at::Tensor();
  losses_.add(terms, state_.loss_names, grads_ok);
  if (losses_.due()) read_losses(state_.batch + 1);  // before the optimizer step: a divergence read here keeps the weights
  ++state_.batch;
  if (window_end) runner_.optimizer_step(state_);
  clock.images += x.size(0);
  shown_ = {.epoch = state_.epoch + 1, .epochs = state_.epochs,
            .memory_gb = t_.place.device.is_cuda() ? cuda::cuda_reserved_bytes(t_.place.device.index()) / 1e9 : 0.0,
            .losses = state_.loss_means(), .instances = batch.targets.size(0), .size = static_cast<int>(x.size(3)),
            .done = static_cast<std::size_t>(state_.batch), .total = static_cast<std::size_t>(state_.batches_per_epoch),
            .elapsed = clock.elapsed(), .images_per_second = clock.images / std::max(clock.elapsed(), 1e-9),
            .data_share = clock.data_share()};
  progress_.update(shown_);
}

void Trainer::carry_out_stop() {
  const int epoch = state_.epoch;
  if (stop_->kind == StopRequest::Kind::interrupt) {
    const bool epoch_finished = state_.batch == state_.batches_per_epoch;
    record_.status(stop_->state, epoch_finished ? epoch + 1 : epoch, -1);  // true even if a second signal ends the save
    record_.save(record_.last(), epoch_finished ? epoch : epoch - 1, epoch_finished ? 0 : state_.batch);
    log::warn("{}: saved {} (resume with model={} resume=true)", stop_->message, record_.last().string(), record_.last().string());
  } else {
    record_.status(stop_->state, epoch, 0);
    log::info("{}", stop_->message);
  }
}

// A stop signal that came with the epoch's last batch: the epoch has trained, so its end runs first
// (validation, results row, last/best/epoch_N.pt), and end_epoch records the stop after it (the
// signal is still pending there). True when it will.
bool Trainer::stop_ends_epoch() {
  if (stop_->kind != StopRequest::Kind::interrupt || state_.batch != state_.batches_per_epoch) return false;
  log::warn("{} during the epoch's last batch: ending epoch {} first", stop_->message, state_.epoch + 1);
  return true;
}

bool Trainer::end_epoch() {
  const int epoch = state_.epoch;
  if (state_.data_share > 0.3 && state_.seen > 2) {
    log::warn("epoch {}: {:.0f}% of the time went to waiting for data (dataloader-bound): raise workers= or use cache=ram",
              epoch + 1, 100 * state_.data_share);
  }
  state_.last_epoch_loss = state_.seen ? state_.total_sum / static_cast<double>(state_.seen) : std::nan("");
  const bool final_epoch = epoch + 1 == state_.epochs;
  if (final_epoch && precise_bn_ > 0) precise_batch_norm(t_, state_, precise_bn_);
  ranks_.align_models(*t_.net.model().module, t_.net.ema ? t_.net.ema_model.module.get() : nullptr, epoch);
  std::optional<eval::Validation> validation;
  if (t_.validator && ((eval_interval_ > 0 && (epoch + 1) % eval_interval_ == 0) || final_epoch)) {
    try {
      validation = validate(t_.net.evaluated_model());
    } catch (const std::exception&) {  // the epoch's weights are kept before the error goes on
      record_.save(record_.last(), epoch, 0);
      log::warn("validation after epoch {} failed; {} holds the epoch's weights", epoch + 1, record_.last().string());
      throw;
    }
  }
  const bool is_best = validation && take_validation(*validation);
  if (validation && final_epoch && save_plots_ && t_.place.main_process()) write_plots(*validation);
  record_.save(record_.last(), epoch, 0);  // first: results.csv never has a row that no checkpoint holds
  record_.add_epoch(epoch_row(is_best, validation));
  if (is_best) {
    record_.save(record_.weights_dir() / "best.pt", epoch, 0);
    log::info("New best model saved - Epoch {}: {}={:.4f}", epoch + 1, state_.metric_name, state_.best_metric);
  }
  if (save_period_ > 0 && (epoch + 1) % save_period_ == 0) {
    record_.save(record_.weights_dir() / fmt::format("epoch_{}.pt", epoch + 1), epoch, 0);
  }
  const double per_epoch = record_.session() / std::max(1, epoch + 1 - first_epoch_);
  record_.status("running", epoch + 1, per_epoch * (state_.epochs - epoch - 1));
  hooks_.on_epoch_end(state_);
  if (patience_ > 0 && state_.best_epoch > 0 && (epoch + 1) - state_.best_epoch >= patience_) {
    log::info("Stopping early: no improvement in {} for {} epochs (best epoch {})", state_.metric_name, patience_, state_.best_epoch);
    stopped_early_ = true;
    ++state_.epoch;
    return true;
  }
  if ((stop_ = ranks_.stop(hooks_.should_stop(state_))) && final_epoch) {  // nothing left to stop: the run is complete
    log::info("{} after the final epoch: the training is complete", stop_->message);
    stop_.reset();
  }
  if (stop_) {  // arrived during validation or saving (or with the epoch's last batch): last.pt already holds this epoch
    record_.status(stop_->state, epoch + 1, -1);
    if (stop_->kind == StopRequest::Kind::interrupt) log::warn("{} after epoch {}: {} holds it (resume with model={} resume=true)", stop_->message, epoch + 1,
              record_.last().string(), record_.last().string());
  }
  return false;
}

}  // namespace loop

TrainOutcome run_training(const config::Config& config, const fs::path& run_dir, HookList& hooks, Collectives* dist) {
  if (Placement{.dist = dist}.main_process()) log::set_file((run_dir / "train.log").string());
  struct LogFileScope { ~LogFileScope() { log::clear_file(); } } log_file_scope;
  return loop::Trainer(config, run_dir, hooks, dist).run();
}

}  // namespace libreyolo::train
