// The loop's Trainer: run() is the whole shape (trainer.h); its stages are defined in
// trainer.cpp (the epoch and its steps) and trainer_epoch_end.cpp (validation, the epoch's
// files, the best-weights average, the end of the run). Internal to lib/train.
#pragma once

#include "core/config.h"
#include "cuda/cuda_info.h"
#include "eval/validator.h"
#include "train/hooks.h"
#include "train/loop_parts.h"
#include "train/progress.h"
#include "train/rank_agreement.h"
#include "train/run_record.h"
#include "train/setup.h"
#include "train/signal_stop.h"
#include "train/step_losses.h"
#include "train/step_runner.h"
#include "train/trainer.h"
#include "train/contention.h"
#include "train/weight_average.h"

#include <nlohmann/json.hpp>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <optional>

namespace libreyolo::train::loop {

// CUDA's synchronisation warnings on for a scope (nothing when `on` is false).
struct SyncWarnings {
  explicit SyncWarnings(bool on) : on_(on) { if (on_) cuda::set_sync_warnings(true); }
  ~SyncWarnings() { if (on_) cuda::set_sync_warnings(false); }
  SyncWarnings(const SyncWarnings&) = delete;
  SyncWarnings& operator=(const SyncWarnings&) = delete;
  bool on_;
};

// On a GPU the steps' logged values are read every this many micro-steps (one transfer, the only
// host sync of the step); between reads the steps queue up without waiting.
constexpr int kLossReadInterval = 10;

// The loop and its stages. run() is the whole shape; each stage is a method below.
class Trainer {
 public:
  Trainer(const config::Config& config, const fs::path& run_dir, HookList& hooks, Collectives* dist)
      : config_(config), run_dir_(run_dir), hooks_(hooks), training_(set_up_training(config, state_, dist)), t_(*training_),
        ranks_(dist), record_(t_, state_, hooks_, ranks_, run_dir), runner_(t_.net, t_.optim, t_.precision, t_.graphs, t_.place.device, hooks_), losses_(t_.place.device.is_cuda() ? kLossReadInterval : 1),
        progress_(config.get_bool("quiet") || !t_.place.main_process(), state_.loss_names, static_cast<int>(config.get_int("log_interval")), ::isatty(2) != 0),
        eval_interval_(static_cast<int>(config.get_int("eval_interval"))),
        save_period_(static_cast<int>(config.get_int("save_period"))),
        patience_(static_cast<int>(config.get_int("patience"))),
        precise_bn_(config.get_int("precise_bn")),
        val_loss_(config.get_bool("val_loss")),
        save_plots_(config.get_bool("save_plots")) {
    hooks_.add(std::make_unique<SignalStopHook>());
    if (auto contention = make_contention_hook(t_.place.device)) hooks_.add(std::move(contention));
    if (const auto n = config.get_int("average_best"); n > 0) set_up_average(static_cast<int>(n));
    if (!record_.has_own_last()) start_ = snapshot(make_checkpoint(t_, state_, state_.start_epoch - 1, state_.start_batch));
  }

  TrainOutcome run() {
    hooks_.on_train_start({.device = t_.place.device, .model_name = t_.net.model().display_name, .batch = t_.place.batch_size,
                           .image_size = t_.inputs.image_size, .autocast = t_.precision.autocast, .amp_dtype = config_.get_text("amp_dtype"),
                           .cpu_bf16_speedup = t_.precision.cpu_bf16_speedup, .workers = t_.place.workers, .run_dir = run_dir_, .model = t_.net.model().module.get(),
                           .may_leave_parameters_unused = t_.net.family->may_leave_parameters_unused()},
                          state_);
    record_.status("running", state_.start_epoch, -1);
    try {
      state_.epoch = state_.start_epoch;
      while (state_.epoch < state_.epochs && !stop_) {
        try {
          begin_epoch();
          train_batches();  // until the epoch ends or a hook asks to stop
          if (stop_ && !stop_ends_epoch()) {
            carry_out_stop();
            break;
          }
          if (end_epoch()) break;  // validation, run files, checkpoints; true: patience ran out
          ++state_.epoch;
        } catch (const Divergence& divergence) {
          recover(divergence);  // back to the last good state; the epoch runs again
        }
      }
      return finish();
    } catch (const std::exception& error) {  // any failure: the run folder says so, then main reports it
      record_.failed(ranks_.describe_failure(error));
      throw;
    }
  }

 private:
  void begin_epoch();
  void recover(const Divergence& divergence);
  void train_batches();
  void read_losses(std::int64_t last_batch);
  void micro_step(const data::Batch& batch, EpochClock& clock);
  void carry_out_stop();
  bool stop_ends_epoch();
  bool end_epoch();
  std::optional<eval::Validation> validate(models::Model& model);
  bool take_validation(const eval::Validation& validation);
  nlohmann::ordered_json epoch_row(bool is_best, const std::optional<eval::Validation>& validation);
  void set_up_average(int count);
  void write_average();
  void write_plots(const eval::Validation& validation);
  TrainOutcome finish();

  const config::Config& config_;
  fs::path run_dir_;
  HookList& hooks_;
  TrainState state_;
  std::unique_ptr<Training> training_;
  Training& t_;
  RankAgreement ranks_;  // what the ranks of a data-parallel run decide together
  RunRecord record_;
  EagerStepRunner runner_;
  StepLosses losses_;  // the steps' logged values on the device until read
  Progress progress_;
  const int eval_interval_, save_period_, patience_;
  const std::int64_t precise_bn_;
  const bool val_loss_, save_plots_;
  std::optional<BestAverage> average_;
  std::optional<StopRequest> stop_;
  bool stopped_early_ = false;
  int recoveries_ = 0;
  int first_epoch_ = state_.start_epoch;  // the first epoch this process trains
  std::optional<models::Checkpoint> start_;  // the starting state, while no last.pt of this run exists
  ProgressValues shown_;
  nlohmann::ordered_json last_metrics_;
};

}  // namespace libreyolo::train::loop
