// The Trainer's end-of-epoch stages (trainer_loop.h): validation and the best metric, the epoch's
// row, the best-weights average, plots and the end of the run.
#include "train/trainer_loop.h"

#include "core/error.h"
#include "core/log.h"
#include "train/checkpoints.h"
#include "train/optimizer.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

namespace libreyolo::train::loop {

std::optional<eval::Validation> Trainer::validate(models::Model& model) {
  model.module->eval();
  std::optional<eval::ValidationLoss> loss;
  if (val_loss_) {
    loss = eval::ValidationLoss{.forward_raw = model.forward_raw,
                                .loss = [this](const std::vector<at::Tensor>& maps, const models::TargetBatch& targets) {
                                  return (*t_.net.loss)(maps, targets);
                                },
                                .names = state_.loss_names};
  }
  auto validation = t_.validator->run(runner_.validation_network(model), loss ? &*loss : nullptr);
  runner_.end_validation();
  t_.net.set_train_mode();
  return validation;
}

// Best-model bookkeeping, the table and the average pool for a validation; true when it is the best.
bool Trainer::take_validation(const eval::Validation& validation) {
  const double metric = t_.task->metric(validation, state_.metric_name);
  const bool is_best = std::isfinite(metric) && (state_.best_epoch == 0 || metric > state_.best_metric);
  if (is_best) {
    state_.best_metric = metric;
    // LibreYOLO's checkpoint keys best_mAP50 / best_mAP50_95; a task without those columns
    // (classification) writes its best metric in both, as LibreYOLO's trainer maps them
    state_.best_map50 = t_.task->metric(validation, "metrics/mAP50");
    state_.best_map50_95 = t_.task->metric(validation, "metrics/mAP50-95");
    if (std::isnan(state_.best_map50)) state_.best_map50 = metric;
    if (std::isnan(state_.best_map50_95)) state_.best_map50_95 = metric;
    state_.best_epoch = state_.epoch + 1;
  }
  const std::string table = t_.task->table(validation, t_.inputs.data.spec.names);
  if (!config_.get_bool("quiet") && t_.place.main_process()) fmt::print(stderr, "{}", table);
  log::to_file(table);
  log::info("Validation - {} ({:.1f}s)", t_.task->summary(validation), validation.seconds);
  if (average_ && average_->consider(models::state_dict(*t_.net.evaluated_model().module), metric)) {
    log::info("average_best: admitted snapshot ({}={:.5f}, pool {}/{})", state_.metric_name, metric, average_->size(),
              average_->capacity());
    if (t_.place.main_process()) average_->save(record_.weights_dir() / "average_pool.pt");
  }
  return is_best;
}

// The results.csv / metrics.jsonl row of a finished epoch.
nlohmann::ordered_json Trainer::epoch_row(bool is_best, const std::optional<eval::Validation>& validation) {
  nlohmann::ordered_json row;
  row["epoch"] = state_.epoch + 1;
  row["time"] = record_.elapsed();
  row["train/loss"] = state_.last_epoch_loss;
  row["validated"] = validation.has_value();
  row["is_best"] = is_best;
  row["current_metric"] = validation ? t_.task->metric(*validation, state_.metric_name) : std::nan("");
  row["current_metric_name"] = state_.metric_name;
  row["best_metric"] = state_.best_epoch ? state_.best_metric : std::nan("");
  row["best_metric_name"] = state_.metric_name;
  row["best_epoch"] = state_.best_epoch;
  const auto means = state_.loss_means();
  for (std::size_t i = 0; i < state_.loss_names.size(); ++i) row["train/" + state_.loss_names[i]] = means[i];
  if (validation) {
    last_metrics_ = nlohmann::ordered_json::object();
    for (const auto& [column, value] : t_.task->metrics(*validation)) {
      last_metrics_[column] = value;
      row[column] = value;
    }
    for (const auto& [name, value] : validation->losses) row["val/" + name] = value;
  }
  for (std::size_t g = 0; g < t_.optim.optimizer->param_groups().size(); ++g) row[fmt::format("lr/group{}", g)] = learning_rate(*t_.optim.optimizer, g);
  row["epoch_time"] = state_.epoch_seconds;
  row["data_wait_share"] = state_.data_share;
  return row;
}

void Trainer::set_up_average(int count) {
  average_.emplace(count);
  log::info("Averaging the {} best checkpoints by {} (weights/average.pt at the end of training)", count, state_.metric_name);
  const fs::path pool = record_.weights_dir() / "average_pool.pt";
  if (t_.place.resume && fs::exists(pool)) log::info("average_best: restored {} snapshot(s) from {}", average_->load(pool), pool.string());
}

// weights/average.pt: the pool's average, validated, with LibreYOLO's average_* metadata.
void Trainer::write_average() {
  const auto averaged = average_->average();
  if (!averaged) return;
  models::Model model = models::build_model(t_.net.loaded.name, t_.inputs.class_count, t_.net.loaded.class_hidden,
                                                     t_.net.loaded.fine_tune);
  if (t_.net.use_branch) model.enable_branch();
  models::load_state_dict(*model.module, std::map<std::string, at::Tensor>(averaged->begin(), averaged->end()), true);
  model.module->to(t_.place.device);
  if (t_.net.channels_last) models::to_channels_last(*model.module);
  std::optional<eval::Validation> validation;
  if (t_.validator) {
    log::info("average_best: validating the averaged weights");
    validation = validate(model);
    log::info("average_best: {}", t_.task->summary(*validation));
  }
  models::Checkpoint c = make_checkpoint(t_, state_, state_.epoch - 1, 0);
  c.model = models::state_dict(*model.module);
  c.set_extra("averaged_snapshot_count", static_cast<std::int64_t>(average_->size()));
  c.set_extra("average_metric_key", state_.metric_name);
  if (validation) c.set_extra("average_metric_value", t_.task->metric(*validation, state_.metric_name));
  const fs::path path = record_.weights_dir() / "average.pt";
  if (t_.place.main_process()) models::write_checkpoint(path, c);
  log::info("average_best: wrote {} from {} snapshots ({} {})", path.string(), average_->size(), state_.metric_name,
            fmt::join(average_->metrics(), ", "));
}

void Trainer::write_plots(const eval::Validation& validation) {
  const fs::path dir = run_dir_ / "val";
  const auto written = t_.task->write_plots(dir, validation, t_.inputs.data.spec.names, t_.validator->dataset(),
                                           static_cast<int>(config_.get_int("plot_samples")));
  log::info("save_plots: {} files in {}", written, dir.string());
}

TrainOutcome Trainer::finish() {
  const bool interrupted = stop_ && stop_->kind == StopRequest::Kind::interrupt;
  if (average_ && !stop_) write_average();
  nlohmann::ordered_json result;
  result["state"] = stop_ ? stop_->state : "completed";
  result["epochs_completed"] = std::min(state_.epoch, state_.epochs);
  result["final_loss"] = state_.last_epoch_loss;
  result["best_epoch"] = state_.best_epoch;
  result["best_mAP50"] = state_.best_map50;
  result["best_mAP50_95"] = state_.best_map50_95;
  result["best_metric_key"] = state_.metric_name;
  result["best_metric_value"] = state_.best_metric;
  result["val_metrics"] = last_metrics_;
  result["stopped_early"] = stopped_early_;
  result["save_dir"] = run_dir_.string();
  result["last_checkpoint"] = record_.last().string();
  if (state_.best_epoch) result["best_checkpoint"] = (record_.weights_dir() / "best.pt").string();
  if (average_ && !stop_ && average_->size()) result["average_checkpoint"] = (record_.weights_dir() / "average.pt").string();
  result["seconds"] = record_.elapsed();
  if (const std::string summary = runner_.graph_summary(); !summary.empty()) log::info("cuda_graph: {}", summary);
  hooks_.on_train_end(state_, result);
  if (!stop_) {
    record_.status("completed", state_.epoch, 0);
    log::info("Training complete: {} epochs in {:.3f}h", state_.epoch, record_.elapsed() / 3600);
    if (state_.best_epoch) {
      const auto columns = t_.task->metric_names();
      if (std::find(columns.begin(), columns.end(), "metrics/mAP50") != columns.end()) {
        log::info("Best mAP50: {:.4f}, mAP50-95: {:.4f} (epoch {})", state_.best_map50, state_.best_map50_95, state_.best_epoch);
      } else {
        log::info("Best {}: {:.4f} (epoch {})", state_.metric_name, state_.best_metric, state_.best_epoch);
      }
    }
    log::info("Weights: {}", record_.weights_dir().string());
  }
  return {result, interrupted ? stop_->exit_code : 0};
}

}  // namespace libreyolo::train::loop
