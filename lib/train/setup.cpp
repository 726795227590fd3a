#include "train/setup.h"
#include "train/setup_stages.h"

#include "core/system_info.h"

#include "core/error.h"
#include "core/log.h"
#include "cuda/cuda_info.h"
#include "models/family.h"
#include "data/sampling.h"
#include "train/capturable_optimizer.h"
#include "train/optimizer.h"
#include "train/sync_batch_norm.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/cuda.h>
#include <torch/utils.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdlib>
#include <algorithm>
#include <set>
#include <array>
#include <map>
#include <thread>

namespace libreyolo::train {

std::vector<std::string> device_list(const std::string& text) {
  std::vector<std::string> devices;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    item.erase(0, item.find_first_not_of(" []"));
    item.erase(item.find_last_not_of(" []") + 1);
    if (!item.empty()) devices.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (devices.empty()) devices.push_back(text);
  return devices;
}

int per_rank_batch(int batch, int world_size) {
  if (batch == -1) throw UsageError("batch=-1 (AutoBatch) needs a GPU and is not built yet: give a batch size such as batch=16");
  if (batch < 1) throw UsageError(fmt::format("batch={} is not a batch size: give 1 or more, such as batch=16", batch));
  if (world_size <= 1) return batch;
  if (batch % world_size != 0) {
    const int lower = std::max(world_size, batch / world_size * world_size);
    throw UsageError(fmt::format("batch={} must be a multiple of the {} data-parallel processes (batch is global and is split "
                                 "evenly): use batch={} or batch={}",
                                 batch, world_size, lower, lower + world_size));
  }
  if (batch < world_size) throw UsageError(fmt::format("batch={} is smaller than the {} processes: give batch={} or more", batch, world_size, world_size));
  return batch / world_size;
}

c10::Device resolve_device(const std::string& text, std::optional<int> local_rank) {
  std::string d = text;
  const auto devices = device_list(text);
  if (devices.size() > 1) {
    if (!local_rank) {
      throw UsageError(fmt::format("device={}: several devices are for data-parallel training (libreyolo train device={}); "
                                   "this command uses one device", text, text));
    }
    if (*local_rank >= static_cast<int>(devices.size())) {
      throw UsageError(fmt::format("device={} names {} devices, but this process is local rank {}: give one device per "
                                   "process on this machine", text, devices.size(), *local_rank));
    }
    d = devices[static_cast<std::size_t>(*local_rank)];
  } else if (local_rank) {
    // torchrun / srun with one device named: each process takes cuda:LOCAL_RANK, the CPU stays the CPU
    if (d == "cpu") return c10::kCPU;
    if (d == "auto" || d.empty()) {
      if (!torch::cuda::is_available()) return c10::kCPU;
    }
    d = std::to_string(*local_rank);
  }
  if (d == "auto" || d.empty()) return torch::cuda::is_available() ? c10::Device(c10::kCUDA, 0) : c10::Device(c10::kCPU);
  if (d == "cpu") return c10::kCPU;
  if (d.rfind("cuda:", 0) == 0) d = d.substr(5);
  if (d == "cuda") d = "0";
  try {
    const int index = std::stoi(d);
    if (!torch::cuda::is_available() || index >= static_cast<int>(torch::cuda::device_count())) {
      throw UsageError(fmt::format("device={}: no such CUDA device ({} visible); use device=cpu", text,
                                   torch::cuda::is_available() ? torch::cuda::device_count() : 0));
    }
    return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(index));
  } catch (const std::invalid_argument&) {
    throw UsageError(fmt::format("device={} is not cpu, auto, a GPU index (0), cuda:N or a list (0,1)", text));
  }
}

void log_ignored_keys(const config::Config& config, bool distributed) {
  for (const auto* spec : config.logged_keys_set()) {
    if (distributed && spec->name == "sync_bn") continue;  // honoured there
    log::info("{}={} ignored ({}); {} runs without it", spec->name, config::format_value(config.value(spec->name)), spec->why,
              config.command() == config::command_val ? "validation" : "training");
  }
  // A family's own key given to another family's model (OptionSpec::families).
  for (const auto* spec : config.keys_of_other_families()) {
    log::warn("{}={} ignored: a key of [{}] only, and model={} is {}; {} runs without it", spec->name,
              config::format_value(config.value(spec->name)), spec->families, config.get_text("model"), config.family(),
              config.command() == config::command_val ? "validation" : "training");
  }
}

void load_run_state(Training& t, TrainState& state, const models::Checkpoint& checkpoint, bool weights) {
  if (weights) {
    const auto* train_model = checkpoint.extra("train_model");
    const models::NamedTensors raw_tensors = train_model ? models::tensors_of(*train_model) : models::NamedTensors{};
    const std::map<std::string, at::Tensor> raw(raw_tensors.begin(), raw_tensors.end());
    const std::map<std::string, at::Tensor> averaged(checkpoint.model.begin(), checkpoint.model.end());
    models::load_state_dict(*t.net.model().module, raw.empty() ? averaged : raw, /*strict=*/false);
    if (t.net.ema) models::load_state_dict(*t.net.ema_model.module, averaged, /*strict=*/false);
  }
  if (t.net.ema) {
    if (const auto* updates = checkpoint.extra("ema_updates"); updates && updates->isInt()) t.net.ema->set_updates(updates->toInt());
  }
  state.read(checkpoint);
  if (const auto* scale = checkpoint.extra("lr_scale"); scale && scale->isDouble()) t.optim.lr_scale = scale->toDouble();
  if (const auto* saved = checkpoint.extra("optimizer"); saved && !saved->isNone()) load_optimizer_state(*t.optim.optimizer, *saved);
  if (const auto* s = checkpoint.extra("scaler"); s && s->isGenericDict()) {
    const auto d = s->toGenericDict();
    t.precision.scaler->load_state({d.at("scale").toDouble(), d.at("growth_tracker").toInt()});
  }
}

void Optimisation::apply_schedule(std::int64_t iteration) {
  set_learning_rate(*optimizer, lr_scale * schedule->lr(iteration), lr_multipliers);
  if (bias_group && warmup_bias_lr > 0 && schedule->warming_up(iteration)) {
    const double multiplier = *bias_group < lr_multipliers.size() ? lr_multipliers[*bias_group] : 1.0;
    set_group_learning_rate(*optimizer, *bias_group, lr_scale * schedule->lr(iteration, warmup_bias_lr) * multiplier);
  }
  if (const auto m = schedule->momentum(iteration)) set_momentum(*optimizer, *m);
}

namespace {








// Optimizer, scaler and RNG from the checkpoint a resumed run continues.
void restore_resume_state(Training& t, TrainState& state) {
  const models::Checkpoint& checkpoint = *t.checkpoint;
  load_run_state(t, state, checkpoint, /*weights=*/false);  // set_up_model loaded the weights
  if (const auto* rng = checkpoint.extra("rng_state"); rng && rng->isGenericDict() && rng->toGenericDict().contains("torch")) {
    at::Generator generator = at::globalContext().defaultGenerator(c10::kCPU);
    generator.set_state(rng->toGenericDict().at("torch").toTensor());
  }
  if (state.start_epoch >= state.epochs) {
    throw UsageError(fmt::format("{} already finished all {} epochs; raise epochs= to train longer", t.net.loaded.weights.string(),
                                 state.epochs));
  }
  log::info("Resuming from {}: epoch {}{}", t.net.loaded.weights.string(), state.start_epoch + 1,
            state.start_batch ? fmt::format(", batch {}/{}", state.start_batch, state.batches_per_epoch) : "");
}



// deterministic=true: the kernel choices that make a GPU run repeat (Ultralytics' init_seeds with
// deterministic): cuDNN's deterministic algorithms without autotuning, ATen's deterministic forms
// (warn_only: an operator without one warns once and runs), and cuBLAS's fixed workspace, which
// it reads when its first handle is made. Process-wide, so restored when the training goes.
std::shared_ptr<void> use_deterministic_kernels() {
  auto& context = at::globalContext();
  const bool cudnn = context.deterministicCuDNN(), benchmark = context.benchmarkCuDNN();
  const bool algorithms = context.deterministicAlgorithms(), warn_only = context.deterministicAlgorithmsWarnOnly();
  setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
  context.setDeterministicCuDNN(true);
  context.setBenchmarkCuDNN(false);
  context.setDeterministicAlgorithms(true, /*warn_only=*/true);
  return std::shared_ptr<void>(nullptr, [=](void*) {
    auto& c = at::globalContext();
    c.setDeterministicCuDNN(cudnn);
    c.setBenchmarkCuDNN(benchmark);
    c.setDeterministicAlgorithms(algorithms, warn_only);
  });
}

}  // namespace

std::unique_ptr<Training> set_up_training(const config::Config& config, TrainState& state, Collectives* dist) {
  auto t = std::make_unique<Training>(config, dist);
  t->place.device = resolve_device(config.get_text("device"), dist ? std::optional<int>(dist->local_rank()) : std::nullopt);
  t->place.seed = static_cast<std::uint64_t>(std::max<std::int64_t>(0, config.get_int("seed")));
  torch::manual_seed(t->place.seed);  // the same on every rank: the starting weights agree before rank 0's are broadcast
  if (config.get_bool("deterministic")) t->place.determinism = use_deterministic_kernels();
  t->place.global_batch = static_cast<int>(config.get_int("batch"));
  t->place.batch_size = per_rank_batch(t->place.global_batch, t->place.world_size());
  t->place.workers = static_cast<int>(config.get_int("workers"));
  if (const int cpus = usable_cpus(); t->place.workers > cpus) {
    log::info("workers={} capped at the {} CPUs this process may use", t->place.workers, cpus);  // as Ultralytics
    t->place.workers = cpus;
  }
  t->place.resume = config.get_text("resume") == "true";
  t->inputs.multi_scale = config.get_bool("multi_scale");

  log_ignored_keys(config, t->place.world_size() > 1);
  // Before the loader's threads start: they would share the cores with the timing.
  if (!t->place.device.is_cuda() && cpu_has_bf16() &&
      ((config.get_bool("amp") && config.get_text("amp_dtype") == "bfloat16") || config.get_bool("profile"))) {
    t->precision.cpu_bf16_speedup = measure_cpu_bf16_speedup();
  }
  set_up_data(config, *t->task, t->place, t->inputs);
  set_up_model(config, t->place, t->inputs, t->checkpoint, t->net);
  eval::check_model_task(t->net.loaded.task, *t->task, config.get_text("model"));
  state.epochs = static_cast<int>(config.get_int("epochs"));
  state.batches_per_epoch = static_cast<std::int64_t>(t->inputs.loader->batches_per_epoch());
  if (!config.is_none("nbs")) {
    // the global batch, as Ultralytics and LibreYOLO count it
    state.set_nominal_batch(config.get_int("nbs"), t->place.global_batch, config.get_real("warmup_epochs"),
                            t->net.family->ramps_nominal_batch());
    if (state.ramp && state.accumulate > 1) {
      log::info("nbs={}: an optimizer step every {} batches of {}, growing from 1 over the first {} batches, weight_decay x{:g} "
                "(YOLOv5's nominal batch)", config.get_int("nbs"), state.accumulate, t->place.global_batch, state.ramp_batches,
                state.weight_decay_scale);
    } else if (state.ramp) {
      log::info("nbs={}: an optimizer step every batch of {} (the batch reaches the nominal batch), weight_decay x{:g} "
                "(YOLOv5's nominal batch)", config.get_int("nbs"), t->place.global_batch, state.weight_decay_scale);
    } else if (state.accumulate > 1) {
      log::info("nbs={}: an optimizer step every {} batches of {}", config.get_int("nbs"), state.accumulate, t->place.global_batch);
    }
  }
  state.loss_names = t->net.family->loss_names();
  t->inputs.augmentation_stop_epoch = strong_augmentation_stop(state.epochs, static_cast<int>(config.get_int("no_aug_epochs")),
                                                                config.get_real("aug_stop_epoch_ratio"));
  // The EMA restart: a key of the families whose reference trainer has it (Family::options()).
  const config::OptionSpec* restart = config::find_option(config.table(), "ema_restart_decay");
  if (restart && config::applies_to(*restart, config.family()) && config.get_real("ema_restart_decay") > 0 &&
      config.get_int("no_aug_epochs") > 0) {
    t->inputs.ema_restart_epoch = state.epochs - static_cast<int>(config.get_int("no_aug_epochs"));
    t->inputs.ema_restart_decay = config.get_real("ema_restart_decay");
  }
  if (t->inputs.multi_scale) {  // the family's sizes, until the strong augmentations stop
    t->inputs.batch_scales = t->net.family->batch_scales(t->net.loaded.name.size, t->inputs.image_size);
  }
  state.metric_name = t->task->best_metric_column(config.get_text("best_metric"));
  state.reset_epoch_sums();
  set_up_optimizer(config, state, t->net, t->optim);
  set_up_amp(config, t->place, t->net, t->precision);
  set_up_cuda_graph(config, t->place, t->inputs, t->net, t->graphs);
  use_device_forms(t->net, t->optim, t->graphs);
  if (t->place.resume) restore_resume_state(*t, state);
  t->optim.apply_schedule(state.schedule_iteration());

  if (t->inputs.val_dataset) {
    t->validator = t->task->make_validator(
        *t->inputs.val_dataset, eval::ValidatorOptions{.family = t->net.family, .batch_size = t->place.global_batch, .image_size = t->inputs.image_size,
                                                .confidence = t->net.family->validation_confidence(), .iou = 0.65,
                                                .max_detections = static_cast<int>(config.get_int("max_det")),
                                                .coco_max_detections = config.is_none("eval_max_det") ? 100 : static_cast<int>(config.get_int("eval_max_det")),
                                                .workers = std::max(1, t->place.workers), .device = t->place.device,
                                                .crop_pct = config.get_real("crop_pct")});
    if (dist) {  // each rank validates every world-th batch; the detections are gathered
      t->validator->distribute({.shard = dist->rank(), .shards = dist->world_size(),
                                .gather_rows = [dist](const at::Tensor& rows) { return dist->gather_rows(rows); },
                                .sum = [dist](at::Tensor& values) { dist->sum(values); }});
    }
  }
  return t;
}

}  // namespace libreyolo::train
