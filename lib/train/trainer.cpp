// The loop (see trainer.h for its shape). Details live in the named helpers below and in
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
#include "train/run_files.h"
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

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

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
  auto batch = t.inputs.loader->next();
  hooks.after_fetch(batch.has_value());
  clock.wait_seconds += seconds_since(wait_start);
  return batch;
}

// multi_scale's generator for a batch: drawn from (seed, epoch, batch), so a resumed run draws the same.
std::mt19937_64 batch_random(std::uint64_t seed, const TrainState& state) {
  return std::mt19937_64(seed * 0x9E3779B97F4A7C15ULL + static_cast<std::uint64_t>(state.epoch) * 1000003ULL +
                         static_cast<std::uint64_t>(state.batch));
}

// Ultralytics' multi_scale: each batch resized to a random multiple of the stride in
// [0.5, 1.5] x imgsz (bilinear).
at::Tensor rescale(const at::Tensor& x, int image_size, std::uint64_t seed, const TrainState& state) {
  constexpr int stride = 32;
  std::mt19937_64 random = batch_random(seed, state);
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

// A DETR's multi_scale (LibreYOLO's collate): the batch resized to one of the family's square sizes,
// drawn as above, until the family's stop epoch.
at::Tensor rescale_to_listed(const at::Tensor& x, const std::vector<int>& sizes, std::uint64_t seed, const TrainState& state) {
  if (sizes.empty()) return x;
  std::mt19937_64 random = batch_random(seed, state);
  const int size = sizes[std::uniform_int_distribution<std::size_t>(0, sizes.size() - 1)(random)];
  if (size == x.size(3) && size == x.size(2)) return x;
  return at::upsample_bilinear2d(x, {size, size}, /*align_corners=*/false);
}

at::Tensor network_input(const Training& t, const at::Tensor& images, const TrainState& state) {
  at::Tensor x = t.net.family->network_input(images, t.place.device);
  if (t.inputs.multi_scale && t.inputs.batch_scales) {
    if (state.epoch < t.inputs.augmentation_stop_epoch) x = rescale_to_listed(x, t.inputs.batch_scales->sizes, t.place.seed, state);
  } else if (t.inputs.multi_scale) {
    x = rescale(x, t.inputs.image_size, t.place.seed, state);
  }
  if (t.net.channels_last) x = x.contiguous(at::MemoryFormat::ChannelsLast);
  return x;
}

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

// Whether every gradient is finite, as a device scalar (no sync here).
at::Tensor gradients_finite(torch::nn::Module& module) {
  std::vector<at::Tensor> grads;
  for (const auto& p : module.parameters()) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  if (grads.empty()) return at::ones({}, at::kBool);
  return at::stack(at::_foreach_norm(grads)).isfinite().all();
}

// precise_bn=N on the final epoch: BatchNorm statistics of the trained and the EMA model from N
// training images of this epoch's order, before they are validated and saved (LibreYOLO's place).
void precise_batch_norm(Training& t, const TrainState& state, std::int64_t images) {
  std::vector<BatchNormTarget> targets;
  for (models::DetectionModel* model : {&t.net.model(), t.net.ema ? &t.net.ema_model : nullptr}) {
    if (!model) continue;
    targets.push_back({model->module.get(), [&t, model](const at::Tensor& x) {
                         AutocastGuard guard(t.place.device.type(), t.precision.amp_dtype, t.precision.autocast);
                         if (t.net.use_aux) model->forward_aux(x); else model->forward(x);
                       }, t.net.frozen.batch_norms});
  }
  t.inputs.loader->start_epoch(state.epoch);
  const std::int64_t used = recompute_batch_norm(targets, [&]() -> std::optional<at::Tensor> {
    auto batch = t.inputs.loader->next();
    if (!batch) return std::nullopt;
    return network_input(t, batch->images, state);
  }, images);
  log::info("Precise BN: recomputed the BatchNorm statistics of {} model{} from {} training images", targets.size(),
            targets.size() > 1 ? "s (trained and EMA)" : "", used);
}

double metric_value(const eval::Validation& v, const std::string& name) {
  if (name == "metrics/mAP50") return v.coco.map50();
  if (name == "metrics/mAP75") return v.coco.map75();
  if (name == "metrics/precision") return v.pr.mean_precision;
  if (name == "metrics/recall") return v.pr.mean_recall;
  return v.coco.map50_95();
}

// A deep copy of a checkpoint's tensors (state dicts alias the live weights). Without autograd: a
// clone of a parameter made under grad mode would keep an autograd node to it (its AccumulateGrad)
// for as long as the copy lives, and a CUDA graph cannot capture a backward that ends in a node
// made on another stream.
models::Checkpoint snapshot(models::Checkpoint c) {
  const at::NoGradGuard no_grad;
  for (auto& [name, tensor] : c.model) tensor = tensor.clone();
  if (const auto* raw = c.extra("train_model")) {
    models::NamedTensors copy = models::tensors_of(*raw);
    for (auto& [name, tensor] : copy) tensor = tensor.clone();
    c.set_extra("train_model", models::tensor_dict(copy));
  }
  c.set_extra("optimizer", c10::IValue());  // nothing to restore before the first step
  return c;
}

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
  std::optional<eval::Validation> validate(models::DetectionModel& model);
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
  data::TrainPipeline& pipeline = *t_.inputs.data.pipeline;
  pipeline.set_mosaic_enabled(!close_mosaic);
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
    targets = runner_.device_targets(batch.targets, x);
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

std::optional<eval::Validation> Trainer::validate(models::DetectionModel& model) {
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
  const double metric = metric_value(validation, state_.metric_name);
  const bool is_best = std::isfinite(metric) && (state_.best_epoch == 0 || metric > state_.best_metric);
  if (is_best) {
    state_.best_metric = metric;
    state_.best_map50 = validation.coco.map50();
    state_.best_map50_95 = validation.coco.map50_95();
    state_.best_epoch = state_.epoch + 1;
  }
  const std::string table = eval::format_table(validation, t_.inputs.data.spec.names);
  if (!config_.get_bool("quiet") && t_.place.main_process()) fmt::print(stderr, "{}", table);
  log::to_file(table);
  log::info("Validation - mAP50: {:.4f}, mAP50-95: {:.4f} ({:.1f}s)", validation.coco.map50(), validation.coco.map50_95(),
            validation.seconds);
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
  row["current_metric"] = validation ? metric_value(*validation, state_.metric_name) : std::nan("");
  row["current_metric_name"] = state_.metric_name;
  row["best_metric"] = state_.best_epoch ? state_.best_metric : std::nan("");
  row["best_metric_name"] = state_.metric_name;
  row["best_epoch"] = state_.best_epoch;
  const auto means = state_.loss_means();
  for (std::size_t i = 0; i < state_.loss_names.size(); ++i) row["train/" + state_.loss_names[i]] = means[i];
  if (validation) {
    const auto& c = validation->coco;
    last_metrics_ = {{"metrics/mAP50-95", c.map50_95()}, {"metrics/mAP50", c.map50()}, {"metrics/mAP75", c.map75()},
                     {"metrics/precision", validation->pr.mean_precision}, {"metrics/recall", validation->pr.mean_recall}};
    for (const auto& item : last_metrics_.items()) row[item.key()] = item.value();
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
  models::DetectionModel model = models::build_model(t_.net.loaded.name, t_.inputs.class_count, t_.net.loaded.class_hidden,
                                                     t_.net.loaded.fine_tune);
  if (t_.net.use_aux) model.enable_aux();
  models::load_state_dict(*model.module, std::map<std::string, at::Tensor>(averaged->begin(), averaged->end()), true);
  model.module->to(t_.place.device);
  if (t_.net.channels_last) models::to_channels_last(*model.module);
  std::optional<eval::Validation> validation;
  if (t_.validator) {
    log::info("average_best: validating the averaged weights");
    validation = validate(model);
    log::info("average_best: mAP50 {:.4f}, mAP50-95 {:.4f}", validation->coco.map50(), validation->coco.map50_95());
  }
  models::Checkpoint c = make_checkpoint(t_, state_, state_.epoch - 1, 0);
  c.model = models::state_dict(*model.module);
  c.set_extra("averaged_snapshot_count", static_cast<std::int64_t>(average_->size()));
  c.set_extra("average_metric_key", state_.metric_name);
  if (validation) c.set_extra("average_metric_value", metric_value(*validation, state_.metric_name));
  const fs::path path = record_.weights_dir() / "average.pt";
  if (t_.place.main_process()) models::write_checkpoint(path, c);
  log::info("average_best: wrote {} from {} snapshots ({} {})", path.string(), average_->size(), state_.metric_name,
            fmt::join(average_->metrics(), ", "));
}

void Trainer::write_plots(const eval::Validation& validation) {
  const fs::path dir = run_dir_ / "val";
  const auto written = eval::write_validation_plots(dir, validation, t_.inputs.data.spec.names, t_.validator->dataset(),
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
      log::info("Best mAP50: {:.4f}, mAP50-95: {:.4f} (epoch {})", state_.best_map50, state_.best_map50_95, state_.best_epoch);
    }
    log::info("Weights: {}", record_.weights_dir().string());
  }
  return {result, interrupted ? stop_->exit_code : 0};
}

}  // namespace

TrainOutcome run_training(const config::Config& config, const fs::path& run_dir, HookList& hooks, Collectives* dist) {
  if (Placement{.dist = dist}.main_process()) log::set_file((run_dir / "train.log").string());
  struct LogFileScope { ~LogFileScope() { log::clear_file(); } } log_file_scope;
  return Trainer(config, run_dir, hooks, dist).run();
}

}  // namespace libreyolo::train
