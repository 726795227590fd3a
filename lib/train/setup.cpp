#include "train/setup.h"

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

bool cuda_supports_bf16(const c10::Device& device) {
  // Ampere (compute capability 8) and later run bfloat16 natively.
  for (const auto& d : cuda::query_cuda_info().devices) {
    if (d.index == device.index()) return d.compute_major >= 8;
  }
  return false;
}

// Tensors of `tensors` whose name and shape fit `module`; the rest (a head for another class
// count) keep their fresh values.
std::size_t load_matching(torch::nn::Module& module, const models::NamedTensors& tensors) {
  std::map<std::string, at::Tensor> by_name(tensors.begin(), tensors.end());
  std::size_t loaded = 0;
  at::NoGradGuard no_grad;
  for (auto& [name, target] : models::state_dict(module)) {
    const auto it = by_name.find(name);
    if (it == by_name.end() || it->second.sizes() != target.sizes()) continue;
    target.copy_(it->second);
    ++loaded;
  }
  return loaded;
}

// min_samples (an epoch floor for tiny datasets) and class_balanced (repeat-factor weights): both
// draw with replacement, as LibreYOLO's samplers do.
void set_up_sampling(const config::Config& config, const data::DetectionDataset& dataset, int class_count,
                     data::LoaderOptions& options) {
  const auto size = dataset.size();
  const auto min_samples = static_cast<std::size_t>(config.get_int("min_samples"));
  if (min_samples > size) options.samples_per_epoch = min_samples;
  if (config.get_bool("class_balanced")) {
    if (config.get_bool("single_cls")) log::warn("class_balanced=true has no effect with single_cls=true: every label is one class");
    options.weights = data::repeat_factors(dataset, class_count);
    log::info("class_balanced sampling active: {} images, drawing {} samples per epoch", size, std::max(size, options.samples_per_epoch));
  } else if (options.samples_per_epoch) {
    log::info("min_samples={} epoch floor active: dataset has {} images; drawing {} samples per epoch", min_samples, size,
              options.samples_per_epoch);
  }
}

void set_up_data(Training& t) {
  const auto& config = t.config;
  t.inputs.data = data::load_training_data(config, models::family_of(config).augment_recipe());
  t.inputs.class_count = t.inputs.data.spec.class_count();
  t.inputs.image_size = t.inputs.data.dataset->image_size();
  if (config.get_bool("val") && !t.inputs.data.spec.val.empty()) {
    auto scan = data::scan_split(t.inputs.data.spec, "val", t.place.workers);
    t.inputs.val_dataset = std::make_unique<data::DetectionDataset>(std::move(scan.images), t.inputs.class_count, t.inputs.image_size,
                                                             data::parse_cache_mode(config.get_text("cache")),
                                                             t.inputs.data.dataset->resize_rule());
  }
  // Each rank takes every world-th sample of the epoch's order: its batch i and the other ranks'
  // batch i together are exactly the single-process global batch i, whatever the world size.
  data::LoaderOptions options{.batch_size = t.place.batch_size, .workers = t.place.workers, .shuffle = true, .seed = t.place.seed,
                              .rank = t.place.rank(), .world_size = t.place.world_size(), .pin_memory = t.place.device.is_cuda()};
  set_up_sampling(config, *t.inputs.data.dataset, t.inputs.class_count, options);
  auto* pipeline = t.inputs.data.pipeline.get();
  t.inputs.loader = std::make_unique<data::Loader>(
      [pipeline](std::size_t index, int epoch, std::span<const std::size_t> batch) { return pipeline->sample(index, epoch, batch); },
      t.inputs.data.dataset->size(), std::move(options));
}

void set_up_model(Training& t) {
  const auto& config = t.config;
  models::LoadedModel& loaded = t.net.loaded;
  loaded = models::load_model(config.get_text("model"), t.inputs.class_count, &t.checkpoint, /*note_dropped=*/!t.place.resume);
  if (loaded.class_count != t.inputs.class_count) {  // pretrained weights for another class count: keep the backbone
    const auto pretrained = models::state_dict(*loaded.model.module);
    loaded.model = models::build_model(loaded.name, t.inputs.class_count, loaded.class_hidden);
    loaded.fine_tune = false;  // the form is chosen below
    const std::size_t kept = load_matching(*loaded.model.module, pretrained);
    log::info("Transferred {}/{} tensors from {} (nc {} -> {})", kept, models::state_dict(*loaded.model.module).size(),
              loaded.weights.string(), loaded.class_count, t.inputs.class_count);
  }
  if (t.place.resume && !t.checkpoint) throw UsageError("resume=true needs model= pointing at a checkpoint (runs/train/exp/weights/last.pt)");
  const std::string pretrained = config.get_text("pretrained");
  // A resumed run's train_config.yaml repeats the pretrained= it started from: its weights are in
  // the checkpoint now. Only a pretrained= given with resume=true on the command line is refused.
  if (pretrained != "true" && pretrained != "false" && t.place.resume && config.source("pretrained") == config::Source::cfg_file) {
    log::info("resume=true: continuing the run's own weights (it started from pretrained={})", pretrained);
  } else if (pretrained != "true" && pretrained != "false") {  // weights by name and shape from another file
    if (t.place.resume) throw UsageError(fmt::format("pretrained={} cannot be combined with resume=true: a resumed run continues its own weights", pretrained));
    const models::Checkpoint source = models::read_checkpoint(pretrained);
    const std::size_t kept = load_matching(*loaded.model.module, source.model);
    log::info("pretrained={}: transferred {}/{} tensors (matched by name and shape)", pretrained, kept,
              models::state_dict(*loaded.model.module).size());
  } else if (pretrained == "true" && !t.place.resume && loaded.weights.empty() &&
             config.source("pretrained") != config::Source::table_default) {
    log::warn("pretrained=true: model={} is an architecture, not a weights file, so {} trains from scratch; give "
              "model=<weights>.pt (or pretrained=<weights>.pt) to start from weights", config.get_text("model"),
              loaded.model.display_name);
  } else if (pretrained == "false" && !t.place.resume && !loaded.weights.empty()) {
    loaded.model = models::build_model(loaded.name, t.inputs.class_count, loaded.class_hidden);
    loaded.fine_tune = false;
    log::info("pretrained=false: training {} from scratch; the weights in {} are not loaded", loaded.model.display_name,
              loaded.weights.string());
  }
  t.net.family = &models::family(loaded.name.family);
  // Training from weights (a weights file, pretrained=<path>), the family's fine-tune form, as
  // LibreYOLO builds a model it loads weights into (RT-DETR: the stem frozen); a resumed run keeps
  // the form it started in, which load_model read from the checkpoint's mark (none: from scratch,
  // the only form before).
  const bool from_weights = t.place.resume ? loaded.fine_tune
                                           : pretrained != "false" && (!loaded.weights.empty() || pretrained != "true");
  const std::string form = t.net.family->fine_tune_form(loaded.name.size);
  if (const bool fine_tune = from_weights && !form.empty(); fine_tune != loaded.fine_tune) {
    const auto weights = models::state_dict(*loaded.model.module);
    loaded.model = models::build_model(loaded.name, t.inputs.class_count, loaded.class_hidden, fine_tune);
    loaded.fine_tune = fine_tune;
    load_matching(*loaded.model.module, weights);
  }
  if (loaded.fine_tune) log::info("{} from weights: {} (LibreYOLO's fine-tune form)", loaded.model.display_name, form);
  models::DetectionModel& model = loaded.model;
  // PGI (YOLOv9): the auxiliary branch trains beside the main head, its losses added at aux_weight;
  // validation and inference use the main head only. A resumed run keeps the branch it was saved with.
  const auto* saved_train_model = t.place.resume ? t.checkpoint->extra("train_model") : nullptr;
  const models::NamedTensors train_weights = saved_train_model ? models::tensors_of(*saved_train_model) : models::NamedTensors{};
  t.net.use_aux = model.enable_aux && config.get_real("aux_weight") > 0;
  if (t.net.use_aux && t.place.resume) {
    const auto& source = saved_train_model ? train_weights : t.checkpoint->model;
    t.net.use_aux = std::any_of(source.begin(), source.end(), [&](const auto& item) { return t.net.family->is_training_only_tensor(item.first); });
    if (!t.net.use_aux) log::info("Resuming a run saved without the PGI auxiliary branch: training on without it");
  }
  if (t.net.use_aux) model.enable_aux();
  t.net.aux_weight = t.net.use_aux ? config.get_real("aux_weight") : 0.0;
  if (saved_train_model) {
    models::load_state_dict(*model.module, std::map<std::string, at::Tensor>(train_weights.begin(), train_weights.end()), true);
  }
  t.net.frozen = freeze_layers(*model.module, config.get_text("freeze"), t.net.family->freeze_groups(t.net.use_aux));
  if (!t.place.resume) {
    const std::string fitted = t.net.family->fit_to_labels(*model.module, *t.inputs.data.dataset, t.inputs.image_size, config);
    if (!fitted.empty()) log::info("{}", fitted);
  }
  model.module->to(t.place.device);
  t.net.set_train_mode();
  if (t.place.dist && config.get_bool("sync_bn")) {
    const std::size_t layers = nn::set_batch_norm_sync(*model.module, std::make_shared<SyncBatchNorm>(*t.place.dist));
    log::info("sync_bn: {} BatchNorm layers normalise over the global batch of {} processes{}", layers, t.place.world_size(),
              t.place.device.is_cpu() ? std::string(" (2 small all-reduces per layer and step; over Gloo they can cost more than the "
                                              "step itself: sync_bn=false averages the statistics before validation instead)")
                                : std::string());
  } else if (t.place.dist && t.place.batch_size < 16) {  // LibreYOLO's warning
    log::warn("sync_bn=false with {} images per process: BatchNorm statistics come from small batches; sync_bn=true "
              "computes them over the global batch", t.place.batch_size);
  }
  const std::string layout = config.get_text("channels_last");
  // auto: measured per family on the CPU (see the option's help); not measured on a GPU yet
  t.net.channels_last = layout == "true" || (layout == "auto" && t.place.device.is_cpu() && t.net.family->channels_last_on_cpu());
  if (t.net.channels_last) models::to_channels_last(*model.module);
  std::int64_t parameters = 0;
  for (const auto& p : model.module->parameters()) parameters += p.numel();
  log::info("{}: {} parameters, device {}{}", model.display_name, parameters, t.place.device.str(), t.net.channels_last ? ", channels-last" : "");

  if (config.get_bool("ema")) {
    t.net.ema_model = models::build_model(loaded.name, t.inputs.class_count, loaded.class_hidden, loaded.fine_tune);
    if (t.net.use_aux) t.net.ema_model.enable_aux();
    t.net.ema_model.module->to(t.place.device);
    if (t.net.channels_last) models::to_channels_last(*t.net.ema_model.module);
    t.net.ema = std::make_unique<ModelEma>(*model.module, t.net.ema_model.module, config.get_real("ema_decay"), config.get_real("ema_tau"));
    if (t.place.resume) {
      std::map<std::string, at::Tensor> weights(t.checkpoint->model.begin(), t.checkpoint->model.end());
      models::load_state_dict(*t.net.ema_model.module, weights, true);
      if (const auto* updates = t.checkpoint->extra("ema_updates")) t.net.ema->set_updates(updates->toInt());
    }
  }
  models::GlobalNormaliser global_normaliser;
  models::GlobalShare global_share;
  if (t.place.dist) {
    global_normaliser = [dist = t.place.dist](const at::Tensor& local) {
      at::Tensor total = local.detach().to(at::kFloat).clone();
      dist->sum(total);
      return total.clamp_min(1.0) / dist->world_size();
    };
    global_share = [dist = t.place.dist](const at::Tensor& local) {
      at::Tensor total = local.detach().to(at::kFloat).clone();
      dist->sum(total);
      return total / dist->world_size();
    };
    *model.batch_share = {.rank = t.place.dist->rank(), .world_size = t.place.dist->world_size(),
                          .global_max = [dist = t.place.dist](std::int64_t local) {
                            at::Tensor value = at::scalar_tensor(static_cast<double>(local), at::kDouble);
                            dist->max(value);
                            return static_cast<std::int64_t>(value.item<double>());
                          }};
  }
  t.net.loss = t.net.family->make_loss({.box = config.get_real("box"), .cls = config.get_real("cls"), .dfl = config.get_real("dfl"),
                                        .obj = config.get_real("obj"), .anchor_t = config.get_real("anchor_t"),
                                        .image_size = t.inputs.image_size, .world_size = t.place.world_size(),
                                        .classes = t.inputs.class_count, .global_normaliser = global_normaliser,
                                        .global_share = global_share});
}

void set_up_optimizer(Training& t, const TrainState& state) {
  const auto& config = t.config;
  if (config.get_text("optimizer") == "sgd" && config.get_bool("nesterov") && config.get_real("momentum") <= 0) {
    throw UsageError(fmt::format("nesterov=true needs momentum > 0 (momentum={}); set a momentum such as 0.937, or nesterov=false",
                                 config.get_real("momentum")));
  }
  const auto groups = parameter_groups(*t.net.model().module, t.net.family->parameter_rules(config));
  t.optim.lr_multipliers = groups.lr_multipliers();
  t.optim.bias_group = groups.bias_group();
  t.optim.warmup_bias_lr = config.get_real("warmup_bias_lr");
  const double weight_decay = config.get_real("weight_decay") * state.weight_decay_scale;
  t.optim.optimizer = make_optimizer(groups, {.name = config.get_text("optimizer"),
                                        .lr0 = config.get_real("lr0"),
                                        .momentum = config.get_real("momentum"),
                                        .nesterov = config.get_bool("nesterov"),
                                        .weight_decay = weight_decay});
  log::info("Optimizer: {}", config.get_text("optimizer"));
  if (groups.ruled.empty()) {
    log::info("  - pg0 (BN): {} params", groups.bn.size());
    log::info("  - pg1 (Conv, wd={}): {} params", weight_decay, groups.weights.size());
    log::info("  - pg2 (Bias): {} params", groups.biases.size());
  }
  for (std::size_t g = 0; g < groups.ruled.size(); ++g) {
    const auto& group = groups.ruled[g];
    log::info("  - pg{}: lr={:g}, wd={:g}, {} params", g, config.get_real("lr0") * group.rule.lr_multiplier,
              group.rule.decay ? weight_decay : 0.0, group.params.size());
  }

  ScheduleOptions schedule_options{.kind = config.get_text("scheduler"),
                                   .lr0 = config.get_real("lr0"),
                                   .warmup_epochs = config.get_real("warmup_epochs"),
                                   .warmup_lr_start = config.get_real("warmup_lr_start"),
                                   .min_lr_ratio = config.get_real("min_lr_ratio"),
                                   .no_aug_epochs = static_cast<int>(config.get_int("no_aug_epochs")),
                                   .steps_per_epoch = state.steps_per_epoch(),
                                   .epochs = state.epochs,
                                   .warmup_momentum = std::nullopt,
                                   .momentum = config.get_real("momentum")};
  if (t.net.family->warms_up_momentum()) schedule_options.warmup_momentum = config.get_real("warmup_momentum");
  t.optim.schedule.emplace(schedule_options);
  t.optim.clip = config.get_real("clip_max_norm");
}

void set_up_amp(Training& t) {
  const auto& config = t.config;
  const bool amp_requested = config.get_bool("amp");
  const std::string amp_dtype_name = config.get_text("amp_dtype");
  t.precision.amp_dtype = amp_dtype_name == "bfloat16" ? c10::kBFloat16 : c10::kHalf;
  if (amp_requested && t.place.device.is_cuda()) {
    if (t.precision.amp_dtype == c10::kBFloat16 && !cuda_supports_bf16(t.place.device)) {
      throw UsageError(fmt::format("amp_dtype=bfloat16 needs a GPU with bfloat16 support; {} has none: use amp_dtype=float16",
                                   t.place.device.str()));
    }
    t.precision.autocast = true;
    log::info("Using mixed precision training (AMP, dtype={})", amp_dtype_name);
  } else if (amp_requested && !t.place.device.is_cuda()) {
    if (t.precision.amp_dtype == c10::kBFloat16 && cpu_has_bf16()) {
      t.precision.autocast = true;
      if (t.precision.cpu_bf16_speedup) {
        const CpuBf16Note note = cpu_bf16_note(*t.precision.cpu_bf16_speedup, cpu_has_amx());
        if (note.warn) {
          log::warn("{}", note.line);
        } else {
          log::info("{}", note.line);
        }
      } else {
        log::info("Using CPU mixed precision (autocast bfloat16)");
      }
    } else if (t.precision.amp_dtype == c10::kBFloat16) {
      log::info("amp_dtype=bfloat16: this CPU has no native bfloat16 (avx512_bf16/amx); training in float32");
    } else if (config.source("amp") == config::Source::command_line) {
      log::info("amp on the CPU uses amp_dtype=bfloat16 only; training in float32");
    }
  }
  t.precision.scaler = std::make_unique<GradScaler>(t.precision.autocast && t.place.device.is_cuda() && t.precision.amp_dtype == c10::kHalf);
  if (t.net.family) {  // the family's word on its precision (D-FINE: why AMP is off, float16's range)
    const auto note = t.net.family->precision_note(amp_requested, t.precision.amp_dtype == c10::kHalf);
    if (note.warning) {
      log::warn("{}", note.text);
    } else if (!note.text.empty()) {
      log::info("{}", note.text);
    }
  }
}

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

// cuda_graph=true: a graph manager for the network, or LibreYOLO's one line saying why not.
void set_up_cuda_graph(Training& t) {
  if (!t.config.get_bool("cuda_graph")) {
    if (t.config.differs_from_default("cuda_graph_scope")) {
      log::info("cuda_graph_scope={} ignored: it applies with cuda_graph=true", t.config.get_text("cuda_graph_scope"));
    }
    return;
  }
  std::string missing;
  auto backend = t.place.device.is_cuda() ? make_cuda_graph_backend(t.place.device.index(), missing) : make_cpu_capture_backend_for_tests();
  const auto reason = graph_gate_reason({.cuda_device = t.place.device.is_cuda() || backend != nullptr,
                                         .backend_available = backend != nullptr,
                                         .backend_missing_reason = missing,
                                         // the YOLO networks are tensors in, tensors out; a DETR's decoder takes the
                                         // targets: its region (backbone and encoder) is captured when the model splits there
                                         .family_supported = t.net.family->graph_region() == models::GraphRegion::network ||
                                                             static_cast<bool>(t.net.model().train_region.run),
                                         .family = std::string(t.net.family->name())});
  if (reason) {
    log::info("cuda_graph=true ignored ({}); training runs eager.", *reason);
    return;
  }
  const auto& scales = t.inputs.batch_scales;
  if (t.inputs.multi_scale && (!scales || !scales->sizes.empty())) {  // the training-performance guide's line
    log::info("cuda_graph with multi_scale: each batch takes one of {} sizes, so no shape may recur often enough to be "
              "captured (a shape's 3rd batch is); multi_scale=false is the lever",
              scales ? fmt::format("{}", std::set<int>(scales->sizes.begin(), scales->sizes.end()).size()) : std::string("many"));
  }
  if (t.place.device.is_cuda()) t.graphs.stream = use_capture_stream(t.place.device.index());
  const bool whole_network = t.net.family->graph_region() == models::GraphRegion::network;
  const std::string region = whole_network ? "the network" : "the backbone and encoder";
  const std::string scope = t.config.get_text("cuda_graph_scope");
  const int level = scope == "network" ? 0 : scope == "loss" ? 1 : scope == "optimizer" ? 2 : 3;
  GraphOptions options{.loss = level >= 1, .optimizer = level >= 2, .ema = level >= 3};
  if (options.loss) {
    std::string obstacle = t.net.loss->capture_obstacle();
    if (obstacle.empty() && t.place.dist) obstacle = "the data-parallel gradient reducer runs outside graphs";
    if (!obstacle.empty()) {
      log::info("cuda_graph_scope={}: {}'s loss stays eager ({}); {}'s forward and backward are graphed instead",
                scope, t.net.family->name(), obstacle, region);
      options.loss = false;
    }
  }
  t.graphs.label_slots = options.loss ? t.config.get_int("max_labels") : 0;
  std::string unused;
  auto val_backend = t.place.device.is_cuda() ? make_cuda_graph_backend(t.place.device.index(), unused) : make_cpu_capture_backend_for_tests();
  if (val_backend) t.graphs.validation = std::make_unique<InferenceGraphs>(std::move(val_backend));
  t.graphs.training = std::make_unique<GraphManager>(std::move(backend), options);
  const std::string optimizer = !options.optimizer ? "the optimizer and EMA stay eager"
                                : options.ema ? "the optimizer step with EMA is a second graph, captured on the 3rd step"
                                              : "the optimizer step is a second graph, captured on the 3rd step; EMA stays eager";
  if (options.loss) {
    log::info("cuda_graph: forward, loss and backward are one graph, captured on the 3rd batch of a shape after 3 warm-up runs "
              "(targets padded to max_labels={} per image, the most the pipeline keeps); {}", t.graphs.label_slots, optimizer);
  } else {
    log::info("cuda_graph: {}'s forward and backward are captured on the 3rd batch of a shape, after 3 warm-up runs; {} eager; {}",
              region, whole_network ? "the loss stays" : "the decoder (its denoising queries follow each batch's targets) and the loss stay",
              optimizer);
  }
}

// What the graphs capture takes the forms a GPU runs, on any device: lr, momentum and the EMA
// decay read from device tensors, the loss's static shapes. On a GPU they are its forms anyway; on
// a CPU only the tests get here (their capture backend, which refuses host reads as CUDA does, or
// device_forms_for_tests for the eager run a graphed one is compared with).
void use_device_forms(Training& t) {
  const bool all = device_forms_for_tests();
  if (all || (t.graphs.training && t.graphs.training->graphs_optimizer())) dynamic_cast<CapturableOptimizer&>(*t.optim.optimizer).use_device_tensors(true);
  if (t.net.ema && (all || (t.graphs.training && t.graphs.training->graphs_ema()))) t.net.ema->use_device_tensors(true);
  if (all || (t.graphs.training && t.graphs.training->graphs_loss())) t.net.loss->use_static_shapes();
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
  set_up_data(*t);
  set_up_model(*t);
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
  if (config.get_real("ema_restart_decay") > 0 && config.get_int("no_aug_epochs") > 0) {
    t->inputs.ema_restart_epoch = state.epochs - static_cast<int>(config.get_int("no_aug_epochs"));
    t->inputs.ema_restart_decay = config.get_real("ema_restart_decay");
  }
  if (t->inputs.multi_scale) {  // the family's sizes, until the strong augmentations stop
    t->inputs.batch_scales = t->net.family->batch_scales(t->net.loaded.name.size, t->inputs.image_size);
  }
  state.metric_name = config.get_text("best_metric");
  state.reset_epoch_sums();
  set_up_optimizer(*t, state);
  set_up_amp(*t);
  set_up_cuda_graph(*t);
  use_device_forms(*t);
  if (t->place.resume) restore_resume_state(*t, state);
  t->optim.apply_schedule(state.schedule_iteration());

  if (t->inputs.val_dataset) {
    t->validator = std::make_unique<eval::Validator>(
        *t->inputs.val_dataset, eval::ValidatorOptions{.family = t->net.family, .batch_size = t->place.global_batch, .image_size = t->inputs.image_size,
                                                .confidence = t->net.family->validation_confidence(), .iou = 0.65,
                                                .max_detections = static_cast<int>(config.get_int("max_det")),
                                                .coco_max_detections = config.is_none("eval_max_det") ? 100 : static_cast<int>(config.get_int("eval_max_det")),
                                                .workers = std::max(1, t->place.workers), .device = t->place.device});
    if (dist) {  // each rank validates every world-th batch; the detections are gathered
      t->validator->distribute({.shard = dist->rank(), .shards = dist->world_size(),
                                .gather_rows = [dist](const at::Tensor& rows) { return dist->gather_rows(rows); },
                                .sum = [dist](at::Tensor& values) { dist->sum(values); }});
    }
  }
  return t;
}

}  // namespace libreyolo::train
