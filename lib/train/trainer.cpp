// The loop (see trainer.h for its shape). Details live in the named helpers below and in
// setup.cpp (what the loop works on), step_runner.cpp (one micro-step), checkpoints.cpp.
#include "train/trainer.h"

#include "core/error.h"
#include "core/log.h"
#include "cuda/cuda_info.h"
#include "train/amp.h"
#include "train/checkpoints.h"
#include "train/optimizer.h"
#include "train/precise_bn.h"
#include "train/progress.h"
#include "train/run_files.h"
#include "train/signal_stop.h"
#include "train/step_runner.h"

#include <ATen/ATen.h>
#include <torch/nn/utils/clip_grad.h>
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <random>
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

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The run folder's files and checkpoints, and the run's clock.
class RunRecord {
 public:
  RunRecord(Training& training, TrainState& state, HookList& hooks, const fs::path& run_dir)
      : t_(training), state_(state), hooks_(hooks), run_dir_(run_dir), weights_(run_dir / "weights"), files_(run_dir) {
    if (t_.resume) files_.load_previous(state_.start_epoch + 1);
    fs::create_directories(weights_);
  }

  const fs::path& weights_dir() const { return weights_; }
  fs::path last() const { return weights_ / "last.pt"; }
  double elapsed() const { return seconds_since(started_); }

  void save(const fs::path& path, int epoch_done, std::int64_t batches_done) {
    models::Checkpoint c = make_checkpoint(t_, state_, epoch_done, batches_done);
    hooks_.on_checkpoint(state_, c);
    models::write_checkpoint(path, c);
  }
  void status(const std::string& state, int epoch_done, double eta) const {
    files_.write_status({{"state", state}, {"epoch", epoch_done}, {"epochs", state_.epochs},
                         {"elapsed_s", elapsed()}, {"eta_s", eta}, {"best_epoch", state_.best_epoch},
                         {"best_metric_name", state_.metric_name}, {"best_metric", state_.best_metric},
                         {"device", t_.device.str()}, {"save_dir", run_dir_.string()}});
  }
  void add_epoch(const nlohmann::ordered_json& row) { files_.add_epoch(row); }

 private:
  Training& t_;
  TrainState& state_;
  HookList& hooks_;
  fs::path run_dir_, weights_;
  RunFiles files_;
  Clock::time_point started_ = Clock::now();
};

// The epoch's timing for the progress line and the data-wait warning.
struct EpochClock {
  Clock::time_point start = Clock::now();
  double wait_seconds = 0;
  std::int64_t images = 0;
  double elapsed() const { return seconds_since(start); }
  double data_share() const { return wait_seconds / std::max(elapsed(), 1e-9); }
};

std::optional<data::Batch> fetch(Training& t, HookList& hooks, EpochClock& clock) {
  const auto wait_start = Clock::now();
  hooks.before_fetch();
  auto batch = t.loader->next();
  hooks.after_fetch(batch.has_value());
  clock.wait_seconds += seconds_since(wait_start);
  return batch;
}

// Ultralytics' multi_scale: each batch resized to a random multiple of the stride in
// [0.5, 1.5] x imgsz (bilinear); drawn from (seed, epoch, batch), so a resumed run draws the same.
at::Tensor rescale(const at::Tensor& x, int image_size, std::uint64_t seed, const TrainState& state) {
  constexpr int stride = 32;
  std::mt19937_64 random(seed * 0x9E3779B97F4A7C15ULL + static_cast<std::uint64_t>(state.epoch) * 1000003ULL +
                         static_cast<std::uint64_t>(state.batch));
  const int low = image_size / 2, high = static_cast<int>(image_size * 1.5) + stride;
  const int size = std::uniform_int_distribution<int>(low, high - 1)(random) / stride * stride;
  const double factor = static_cast<double>(size) / static_cast<double>(std::max(x.size(2), x.size(3)));
  if (factor == 1.0) return x;
  std::vector<std::int64_t> shape;
  for (const std::int64_t side : {x.size(2), x.size(3)}) {
    shape.push_back(std::max<std::int64_t>(stride, static_cast<std::int64_t>(std::ceil(side * factor / stride)) * stride));
  }
  return at::upsample_bilinear2d(x, shape, /*align_corners=*/false);
}

at::Tensor network_input(const Training& t, const at::Tensor& images, const TrainState& state) {
  at::Tensor x = t.family->network_input(images, t.device);
  if (t.multi_scale) x = rescale(x, t.image_size, t.seed, state);
  if (t.channels_last) x = x.contiguous(at::MemoryFormat::ChannelsLast);
  return x;
}

// The logged values of a step in one device-to-host transfer (the step's only sync): total first.
std::vector<double> read_losses(const models::LossTerms& terms, const std::vector<std::string>& names) {
  std::vector<at::Tensor> logged{terms.total.detach().reshape({}).to(at::kFloat)};
  for (const auto& n : names) logged.push_back(terms.part(n).reshape({}).to(at::kFloat));
  const at::Tensor values = at::stack(logged).cpu();
  const float* v = values.data_ptr<float>();
  return {v, v + values.numel()};
}

// Unscale and clip (when asked), step through the scaler, EMA, then the next step's LR.
void optimizer_step(Training& t, TrainState& state, HookList& hooks) {
  hooks.after_backward(state);
  {
    const auto phase = hooks.phase(Phase::optimizer);
    if (t.clip > 0) {
      t.scaler->unscale(*t.optimizer);
      std::vector<at::Tensor> params;
      for (const auto& p : t.model().module->parameters()) if (p.grad().defined()) params.push_back(p);
      torch::nn::utils::clip_grad_norm_(params, t.clip);
    }
    hooks.before_optimizer_step(state);
    t.scaler->step(*t.optimizer);
    t.scaler->update();
  }
  if (t.ema) t.ema->update(*t.model().module);
  ++state.optimizer_steps;
  t.apply_schedule(state.optimizer_steps);
}

// precise_bn=N on the final epoch: BatchNorm statistics of the trained and the EMA model from N
// training images of this epoch's order, before they are validated and saved (LibreYOLO's place).
void precise_batch_norm(Training& t, const TrainState& state, std::int64_t images) {
  std::vector<BatchNormTarget> targets;
  for (models::DetectionModel* model : {&t.model(), t.ema ? &t.ema_model : nullptr}) {
    if (!model) continue;
    targets.push_back({model->module.get(), [&t, model](const at::Tensor& x) {
                         AutocastGuard guard(t.device.type(), t.amp_dtype, t.autocast);
                         if (t.use_aux) model->forward_aux(x); else model->forward(x);
                       }, t.frozen.batch_norms});
  }
  t.loader->start_epoch(state.epoch);
  const std::int64_t used = recompute_batch_norm(targets, [&]() -> std::optional<at::Tensor> {
    auto batch = t.loader->next();
    if (!batch) return std::nullopt;
    return network_input(t, batch->images, state);
  }, images);
  log::info("Precise BN: recomputed the BatchNorm statistics of {} model{} from {} training images", targets.size(),
            targets.size() > 1 ? "s (trained and EMA)" : "", used);
}

std::optional<eval::Validation> validate(Training& t) {
  models::DetectionModel& evaluated = t.evaluated_model();
  evaluated.module->eval();
  auto validation = t.validator->run([&](const at::Tensor& x) {
    AutocastGuard guard(t.device.type(), t.amp_dtype, t.autocast && t.device.is_cuda());
    return evaluated.forward(x);
  });
  t.set_train_mode();
  return validation;
}

double metric_value(const eval::Validation& v, const std::string& name) {
  if (name == "metrics/mAP50") return v.coco.map50();
  if (name == "metrics/mAP75") return v.coco.map75();
  if (name == "metrics/precision") return v.pr.mean_precision;
  if (name == "metrics/recall") return v.pr.mean_recall;
  return v.coco.map50_95();
}

// The results.csv / metrics.jsonl row of a finished epoch.
nlohmann::ordered_json epoch_row(const Training& t, const TrainState& state, double time, double epoch_seconds,
                                 double data_share, bool is_best, const std::optional<eval::Validation>& validation,
                                 nlohmann::ordered_json& last_metrics) {
  nlohmann::ordered_json row;
  row["epoch"] = state.epoch + 1;
  row["time"] = time;
  row["train/loss"] = state.last_epoch_loss;
  row["validated"] = validation.has_value();
  row["is_best"] = is_best;
  row["current_metric"] = validation ? metric_value(*validation, state.metric_name) : std::nan("");
  row["current_metric_name"] = state.metric_name;
  row["best_metric"] = state.best_epoch ? state.best_metric : std::nan("");
  row["best_metric_name"] = state.metric_name;
  row["best_epoch"] = state.best_epoch;
  const auto means = state.loss_means();
  for (std::size_t i = 0; i < state.loss_names.size(); ++i) row["train/" + state.loss_names[i]] = means[i];
  if (validation) {
    const auto& c = validation->coco;
    last_metrics = {{"metrics/mAP50-95", c.map50_95()}, {"metrics/mAP50", c.map50()}, {"metrics/mAP75", c.map75()},
                    {"metrics/precision", validation->pr.mean_precision}, {"metrics/recall", validation->pr.mean_recall}};
    for (const auto& item : last_metrics.items()) row[item.key()] = item.value();
  }
  for (std::size_t g = 0; g < t.optimizer->param_groups().size(); ++g) row[fmt::format("lr/group{}", g)] = learning_rate(*t.optimizer, g);
  row["epoch_time"] = epoch_seconds;
  row["data_wait_share"] = data_share;
  return row;
}

}  // namespace

TrainOutcome run_training(const config::Config& config, const fs::path& run_dir, HookList& hooks) {
  log::set_file((run_dir / "train.log").string());
  struct LogFileScope { ~LogFileScope() { log::clear_file(); } } log_file_scope;
  TrainState state;
  const auto training = set_up_training(config, state);
  Training& t = *training;
  RunRecord record(t, state, hooks, run_dir);
  hooks.add(std::make_unique<SignalStopHook>());
  EagerStepRunner runner(t, hooks);
  Progress progress(config.get_bool("quiet"), state.loss_names, static_cast<int>(config.get_int("log_interval")), ::isatty(2) != 0);
  const int no_aug_epochs = static_cast<int>(config.get_int("no_aug_epochs"));
  const int eval_interval = static_cast<int>(config.get_int("eval_interval"));
  const int save_period = static_cast<int>(config.get_int("save_period"));
  const int patience = static_cast<int>(config.get_int("patience"));
  const std::int64_t precise_bn = config.get_int("precise_bn");
  hooks.on_train_start({.device = t.device, .model_name = t.model().display_name, .batch = t.batch_size,
                        .image_size = t.image_size, .autocast = t.autocast, .amp_dtype = config.get_text("amp_dtype"),
                        .workers = t.workers, .run_dir = run_dir},
                       state);
  record.status("running", state.start_epoch, -1);

  nlohmann::ordered_json last_metrics;
  std::optional<StopRequest> stop;
  bool stopped_early = false;
  int& epoch = state.epoch;
  for (epoch = state.start_epoch; epoch < state.epochs && !stop; ++epoch) {
    // ---- per-epoch switches
    const bool close_mosaic = epoch >= state.epochs - no_aug_epochs;
    t.data.pipeline->set_mosaic_enabled(!close_mosaic);
    if (close_mosaic) {
      const std::string loss_change = t.loss->close_augmentation();
      if (epoch == state.epochs - no_aug_epochs) {
        log::info("Closing mosaic and mixup for the last {} epochs{}", no_aug_epochs,
                  loss_change.empty() ? "" : fmt::format(" ({})", loss_change));
      }
    }
    t.set_train_mode();
    state.batch = epoch == state.start_epoch ? state.start_batch : 0;
    t.loader->start_epoch(epoch, static_cast<std::size_t>(state.batch));
    if (state.batch == 0) state.reset_epoch_sums();
    progress.print_header();
    EpochClock clock;
    ProgressValues shown;

    // ---- the batches
    while (auto batch = fetch(t, hooks, clock)) {
      const std::int64_t window_start = state.window_start(), window = state.window_length();
      if (state.batch == window_start) t.optimizer->zero_grad(/*set_to_none=*/true);
      at::Tensor x;
      models::TargetBatch targets;
      {
        const auto phase = hooks.phase(Phase::to_device);
        x = network_input(t, batch->images, state);
        targets = models::pad_targets(batch->targets, x.size(0), x.size(3), x.size(2)).to(t.device);
      }
      const models::LossTerms terms = runner.run(x, targets, static_cast<double>(window));
      const std::vector<double> losses = read_losses(terms, state.loss_names);
      if (!std::isfinite(losses[0])) {
        record.save(record.last(), epoch - 1, state.batch);
        record.status("failed", epoch, -1);
        throw RuntimeError(fmt::format("training diverged: the loss is {} at epoch {}, batch {}; {} holds the weights "
                                       "from before this step. Lower lr0, check the labels, or train in float32 (amp=false)",
                                       losses[0], epoch + 1, state.batch + 1, record.last().string()));
      }
      ++state.batch;
      const bool window_end = state.batch - window_start == window;
      if (window_end) optimizer_step(t, state, hooks);
      state.add_losses(losses[0], {losses.begin() + 1, losses.end()});
      clock.images += x.size(0);
      shown = {.epoch = epoch + 1, .epochs = state.epochs,
               .memory_gb = t.device.is_cuda() ? cuda::cuda_reserved_bytes(t.device.index()) / 1e9 : 0.0,
               .losses = state.loss_means(), .instances = batch->targets.size(0), .size = static_cast<int>(x.size(3)),
               .done = static_cast<std::size_t>(state.batch), .total = static_cast<std::size_t>(state.batches_per_epoch),
               .elapsed = clock.elapsed(), .images_per_second = clock.images / std::max(clock.elapsed(), 1e-9),
               .data_share = clock.data_share()};
      progress.update(shown);
      hooks.on_step_end(state);
      stop = hooks.should_stop(state);
      if (stop && (stop->kind == StopRequest::Kind::finish || window_end)) break;
      stop.reset();  // an interrupt waits for the end of the accumulation window
    }
    if (shown.total) progress.finish(shown);
    if (stop) {
      if (stop->kind == StopRequest::Kind::interrupt) {
        const bool epoch_finished = state.batch == state.batches_per_epoch;
        record.save(record.last(), epoch_finished ? epoch : epoch - 1, epoch_finished ? 0 : state.batch);
        record.status(stop->state, epoch_finished ? epoch + 1 : epoch, -1);
        log::warn("{}: saved {} (resume with model={} resume=true)", stop->message, record.last().string(), record.last().string());
      } else {
        record.status(stop->state, epoch, 0);
        log::info("{}", stop->message);
      }
      break;
    }

    // ---- end of epoch: validation, files, checkpoints, patience
    const double epoch_seconds = clock.elapsed();
    if (clock.data_share() > 0.3 && state.seen > 2) {
      log::warn("epoch {}: {:.0f}% of the time went to waiting for data (dataloader-bound): raise workers= or use cache=ram",
                epoch + 1, 100 * clock.data_share());
    }
    state.last_epoch_loss = state.seen ? state.total_sum / static_cast<double>(state.seen) : std::nan("");
    const bool final_epoch = epoch + 1 == state.epochs;
    if (final_epoch && precise_bn > 0) precise_batch_norm(t, state, precise_bn);
    std::optional<eval::Validation> validation;
    if (t.validator && ((eval_interval > 0 && (epoch + 1) % eval_interval == 0) || final_epoch)) validation = validate(t);
    bool is_best = false;
    if (validation) {
      const double metric = metric_value(*validation, state.metric_name);
      is_best = std::isfinite(metric) && (state.best_epoch == 0 || metric > state.best_metric);
      if (is_best) {
        state.best_metric = metric;
        state.best_map50 = validation->coco.map50();
        state.best_map50_95 = validation->coco.map50_95();
        state.best_epoch = epoch + 1;
      }
      const std::string table = eval::format_table(*validation, t.data.spec.names);
      if (!config.get_bool("quiet")) fmt::print(stderr, "{}", table);
      log::to_file(table);
      log::info("Validation - mAP50: {:.4f}, mAP50-95: {:.4f} ({:.1f}s)", validation->coco.map50(), validation->coco.map50_95(),
                validation->seconds);
    }
    record.add_epoch(epoch_row(t, state, record.elapsed(), epoch_seconds, clock.data_share(), is_best, validation, last_metrics));
    record.save(record.last(), epoch, 0);
    if (is_best) {
      record.save(record.weights_dir() / "best.pt", epoch, 0);
      log::info("New best model saved - Epoch {}: {}={:.4f}", epoch + 1, state.metric_name, state.best_metric);
    }
    if (save_period > 0 && (epoch + 1) % save_period == 0) record.save(record.weights_dir() / fmt::format("epoch_{}.pt", epoch + 1), epoch, 0);
    const double per_epoch = record.elapsed() / (epoch + 1 - state.start_epoch);
    record.status("running", epoch + 1, per_epoch * (state.epochs - epoch - 1));
    hooks.on_epoch_end(state);
    if (patience > 0 && state.best_epoch > 0 && (epoch + 1) - state.best_epoch >= patience) {
      log::info("Stopping early: no improvement in {} for {} epochs (best epoch {})", state.metric_name, patience, state.best_epoch);
      stopped_early = true;
      ++epoch;
      break;
    }
    if ((stop = hooks.should_stop(state))) record.status(stop->state, epoch + 1, -1);  // arrived during validation or saving
  }

  // ---- the result
  nlohmann::ordered_json result;
  const bool interrupted = stop && stop->kind == StopRequest::Kind::interrupt;
  result["state"] = stop ? stop->state : "completed";
  result["epochs_completed"] = std::min(epoch, state.epochs);
  result["final_loss"] = state.last_epoch_loss;
  result["best_epoch"] = state.best_epoch;
  result["best_mAP50"] = state.best_map50;
  result["best_mAP50_95"] = state.best_map50_95;
  result["best_metric_key"] = state.metric_name;
  result["best_metric_value"] = state.best_metric;
  result["val_metrics"] = last_metrics;
  result["stopped_early"] = stopped_early;
  result["save_dir"] = run_dir.string();
  result["last_checkpoint"] = record.last().string();
  if (state.best_epoch) result["best_checkpoint"] = (record.weights_dir() / "best.pt").string();
  result["seconds"] = record.elapsed();
  hooks.on_train_end(state, result);
  if (!stop) {
    record.status("completed", epoch, 0);
    log::info("Training complete: {} epochs in {:.3f}h", epoch - state.start_epoch, record.elapsed() / 3600);
    if (state.best_epoch) log::info("Best mAP50: {:.4f}, mAP50-95: {:.4f} (epoch {})", state.best_map50, state.best_map50_95, state.best_epoch);
    log::info("Weights: {}", record.weights_dir().string());
  }
  return {result, interrupted ? stop->exit_code : 0};
}

}  // namespace libreyolo::train
