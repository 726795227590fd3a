// The run folder's files and checkpoints, and the run's clock (the loop's RunRecord), and the
// Divergence a non-finite save raises. Internal to lib/train (trainer.cpp).
#pragma once

#include "core/error.h"
#include "core/log.h"
#include "models/checkpoint.h"
#include "train/checkpoints.h"
#include "train/hooks.h"
#include "train/loop_parts.h"
#include "train/rank_agreement.h"
#include "train/run_files.h"
#include "train/setup.h"
#include "train/signal_stop.h"
#include "train/train_state.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>

namespace libreyolo::train {

// Training went non-finite (loss, gradients, weights or BatchNorm statistics): the loop reloads
// the last good state, at most three times (as Ultralytics 8.4).
struct Divergence : RuntimeError {
  using RuntimeError::RuntimeError;
};

// The run folder's files and checkpoints, and the run's clock. In a data-parallel run every rank
// keeps the record (the same decisions everywhere) and rank 0 alone writes it.
class RunRecord {
 public:
  RunRecord(Training& training, TrainState& state, HookList& hooks, RankAgreement& ranks, const fs::path& run_dir)
      : t_(training), state_(state), hooks_(hooks), ranks_(ranks), run_dir_(run_dir), weights_(run_dir / "weights"), files_(run_dir),
        writes_(training.place.main_process()) {
    if (t_.place.resume) files_.load_previous(state_.start_epoch + 1);
    if (writes_) fs::create_directories(weights_);
  }

  const fs::path& weights_dir() const { return weights_; }
  fs::path last() const { return weights_ / "last.pt"; }
  // The run's training time: this process's plus what the checkpoint it resumed from had.
  double elapsed() const { return earlier_ + session(); }
  double session() const { return seconds_since(started_); }

  // Never writes non-finite weights or statistics: a Divergence instead, and the file stays as it was.
  void save(const fs::path& path, int epoch_done, std::int64_t batches_done) {
    state_.train_seconds = elapsed();
    models::Checkpoint c = make_checkpoint(t_, state_, epoch_done, batches_done);
    auto bad = models::first_non_finite(c.model);
    if (const auto* raw = c.extra("train_model"); !bad && raw) bad = models::first_non_finite(models::tensors_of(*raw));
    if (ranks_.any(bad.has_value())) {  // BatchNorm statistics may differ between ranks
      throw Divergence(fmt::format("non-finite values in {} after epoch {}, batch {} ({} not written)",
                                   bad ? *bad : std::string("another rank's BatchNorm statistics"), state_.epoch + 1,
                                   state_.batch, path.filename().string()));
    }
    hooks_.on_checkpoint(state_, c);
    if (writes_) models::write_checkpoint(path, c);
    if (path == last()) wrote_last_ = true;
  }
  // last.pt is this run's own: written by this process, or the checkpoint a resumed run continues.
  bool has_own_last() const { return wrote_last_ || (t_.place.resume && fs::exists(last())); }
  void status(const std::string& state, int epoch_done, double eta) const {
    if (!writes_) return;
    auto status = status_of(state, epoch_done);
    status["eta_s"] = eta;
    files_.write_status(status);
    if (state == "running" || state == "interrupted") {  // what a second Ctrl-C leaves, if it comes
      auto cut = status_of("interrupted", epoch_done);
      const std::string saved = has_own_last() ? "weights/last.pt holds the last completed save"
                                               : "no checkpoint had been saved yet (no weights/last.pt): train again from the start";
      cut["message"] = "second stop signal: exited without saving; " + saved;
      prepare_second_signal_status(run_dir_ / "status.json", cut.dump(2) + "\n", saved);
    } else {
      clear_second_signal_status();
    }
  }
  void add_epoch(const nlohmann::ordered_json& row) {
    if (writes_) files_.add_epoch(row);
  }
  // status.json and train.log say that the run failed, where, and why.
  void failed(const std::string& message) const {
    if (!writes_) return;
    clear_second_signal_status();
    auto status = status_of("failed", state_.epoch + 1);
    status["batch"] = state_.batch;
    status["message"] = message;
    files_.write_status(status);
    log::to_file(fmt::format("ERROR: {}", message));
  }

 private:
  nlohmann::ordered_json status_of(const std::string& state, int epoch) const {
    nlohmann::ordered_json status = {{"state", state}, {"epoch", epoch}, {"epochs", state_.epochs}, {"elapsed_s", elapsed()},
            {"best_epoch", state_.best_epoch}, {"best_metric_name", state_.metric_name}, {"best_metric", state_.best_metric},
            {"device", t_.place.device.str()}, {"save_dir", run_dir_.string()}};
    if (ranks_.distributed()) status["world_size"] = ranks_.world_size();
    return status;
  }

  Training& t_;
  TrainState& state_;
  HookList& hooks_;
  RankAgreement& ranks_;
  fs::path run_dir_, weights_;
  RunFiles files_;
  Clock::time_point started_ = Clock::now();
  double earlier_ = state_.train_seconds;
  bool writes_;
  bool wrote_last_ = false;
};

}  // namespace libreyolo::train
