#include "train/trainer.h"

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/log.h"
#include "cuda/cuda_info.h"
#include "data/loader.h"
#include "data/training_data.h"
#include "eval/validator.h"
#include "models/checkpoint.h"
#include "models/targets.h"
#include "models/yolo9/loss.h"
#include "models/yolo9/model.h"
#include "models/yolox/loss.h"
#include "profile/step_profiler.h"
#include "train/amp.h"
#include "train/ema.h"
#include "train/optimizer.h"
#include "train/run_files.h"
#include "train/schedule.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/cuda.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/utils.h>
#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <map>
#include <unistd.h>

namespace libreyolo::train {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::atomic<int> stop_signal{0};
extern "C" void on_stop_signal(int signal) { stop_signal = signal; }

struct SignalScope {
  using Handler = void (*)(int);
  Handler previous_int, previous_term;
  SignalScope() {
    stop_signal = 0;
    previous_int = std::signal(SIGINT, on_stop_signal);
    previous_term = std::signal(SIGTERM, on_stop_signal);
  }
  ~SignalScope() {
    std::signal(SIGINT, previous_int);
    std::signal(SIGTERM, previous_term);
  }
};

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

c10::Device resolve_device(const std::string& text) {
  std::string d = text;
  if (d == "auto" || d.empty()) return torch::cuda::is_available() ? c10::Device(c10::kCUDA, 0) : c10::Device(c10::kCPU);
  if (d == "cpu") return c10::kCPU;
  if (d.find(',') != std::string::npos) {
    throw UsageError(fmt::format("device={}: multi-GPU training is launched with torchrun (not built yet); use one device", text));
  }
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
    throw UsageError(fmt::format("device={} is not cpu, auto, a GPU index (0) or cuda:N", text));
  }
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

c10::IValue state_dict_value(torch::nn::Module& module) {
  c10::impl::GenericDict dict(c10::StringType::get(), c10::TensorType::get());
  for (const auto& [name, tensor] : models::state_dict(module)) dict.insert(name, tensor);
  return dict;
}

models::NamedTensors named_tensors(const c10::IValue& value) {
  models::NamedTensors out;
  for (const auto& entry : value.toGenericDict()) out.emplace_back(entry.key().toStringRef(), entry.value().toTensor());
  return out;
}

c10::IValue config_value(const config::Config& config) {
  c10::impl::GenericDict dict(c10::StringType::get(), c10::AnyType::get());
  const YAML::Node root = YAML::Load(config.to_yaml());
  for (const auto& item : root) {
    const std::string key = item.first.as<std::string>();
    if (item.second.IsScalar()) dict.insert(key, item.second.as<std::string>());
    else if (item.second.IsNull()) dict.insert(key, c10::IValue());
    else {
      YAML::Emitter e;
      e << YAML::Flow << item.second;
      dict.insert(key, std::string(e.c_str()));
    }
  }
  return dict;
}

std::string format_duration(double seconds) {
  const auto s = static_cast<long>(std::max(0.0, seconds));
  return s >= 3600 ? fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60) : fmt::format("{:02}:{:02}", s / 60, s % 60);
}

// Live epoch line on stderr: redrawn in place on a terminal, printed at the end otherwise.
class Progress {
 public:
  Progress(bool quiet, std::vector<std::string> loss_names)
      : quiet_(quiet), tty_(::isatty(2) != 0), names_(std::move(loss_names)) {}

  std::string header() const {
    std::string h = fmt::format("{:>11}{:>11}", "Epoch", "GPU_mem");
    for (const auto& n : names_) h += fmt::format("{:>11}", n);
    return h + fmt::format("{:>11}{:>11}", "Instances", "Size");
  }

  void print_header() const {
    if (!quiet_) log::write("", "\n" + header());
  }

  std::string line(int epoch, int epochs, double memory_gb, const std::vector<double>& losses, std::int64_t instances,
                   int size, std::size_t done, std::size_t total, double elapsed, double images_per_second,
                   double data_share) const {
    std::string l = fmt::format("{:>11}{:>11}", fmt::format("{}/{}", epoch, epochs), fmt::format("{:.3g}G", memory_gb));
    for (const double v : losses) l += fmt::format("{:>11.4f}", v);
    const int width = 10, filled = total ? static_cast<int>(width * done / total) : width;
    std::string bar;
    for (int i = 0; i < width; ++i) bar += i < filled ? "█" : " ";
    const double eta = done ? elapsed / done * (total - done) : 0;
    l += fmt::format("{:>11}{:>11}: {:3}%|{}| {}/{} [{}<{}, {:.1f} img/s, data {:.0f}%]", instances, size,
                     total ? 100 * done / total : 100, bar, done, total, format_duration(elapsed), format_duration(eta),
                     images_per_second, 100 * data_share);
    return l;
  }

  void update(const std::string& text, bool final) {
    if (quiet_) {
      if (final) log::to_file(text);
      return;
    }
    if (tty_) {
      fmt::print(stderr, "\r{}\033[K", text);
      if (final) {
        fmt::print(stderr, "\n");
        log::to_file(text);
      }
    } else if (final) {
      log::write("", text);
    }
  }

 private:
  bool quiet_, tty_;
  std::vector<std::string> names_;
};

std::unique_ptr<profile::StepProfiler> make_profiler(const config::Config& config, const fs::path& run_dir, const c10::Device& device,
                                                    const std::string& model_name, int batch, int image_size, bool autocast,
                                                    const std::string& amp_dtype, int workers, std::int64_t accumulate) {
  if (!config.get_bool("profile")) return nullptr;
  if (const char* world = std::getenv("WORLD_SIZE"); world && std::atoi(world) > 1) {
    log::warn("profile=true is ignored under distributed training.");
    return nullptr;
  }
  nlohmann::ordered_json meta = {{"model", model_name}, {"device", device.str()}, {"batch", batch}, {"imgsz", image_size},
                                 {"amp", autocast}, {"amp_dtype", autocast ? nlohmann::ordered_json(amp_dtype) : nlohmann::ordered_json(nullptr)},
                                 {"workers", workers}};
  return std::make_unique<profile::StepProfiler>(profile::ProfilerOptions{
      .warmup = static_cast<int>(config.get_int("profile_warmup")),
      .steps = static_cast<int>(config.get_int("profile_steps")),
      .accumulate = static_cast<int>(accumulate),
      .trace = config.get_bool("profile_trace"),
      .quiet = config.get_bool("quiet"),
      .open = config.get_bool("profile_open"),
      .device = device,
      .meta = std::move(meta),
      .run_dir = run_dir});
}

}  // namespace

TrainOutcome run_training(const config::Config& config, const fs::path& run_dir) {
  const auto started = Clock::now();
  log::set_file((run_dir / "train.log").string());
  struct LogFileScope { ~LogFileScope() { log::clear_file(); } } log_file_scope;
  const c10::Device device = resolve_device(config.get_text("device"));
  const std::uint64_t seed = static_cast<std::uint64_t>(std::max<std::int64_t>(0, config.get_int("seed")));
  torch::manual_seed(seed);
  const int epochs = static_cast<int>(config.get_int("epochs"));
  const int batch_size = static_cast<int>(config.get_int("batch"));
  if (batch_size < 1) throw UsageError("batch must be ≥ 1 (batch=-1, AutoBatch, needs a GPU and is not built yet)");
  const int workers = static_cast<int>(config.get_int("workers"));
  const bool resume = config.get_text("resume") == "true";

  // ------------------------------------------------------------------ data
  auto training = data::load_training_data(config);
  const int class_count = training.spec.class_count();
  const auto& names = training.spec.names;
  const int image_size = training.dataset->image_size();
  std::unique_ptr<data::DetectionDataset> val_dataset;
  const bool validate = config.get_bool("val") && !training.spec.val.empty();
  if (validate) {
    auto scan = data::scan_split(training.spec, "val", workers);
    val_dataset = std::make_unique<data::DetectionDataset>(std::move(scan.images), class_count, image_size,
                                                           data::parse_cache_mode(config.get_text("cache")));
  }

  // ------------------------------------------------------------------ model
  const std::string model_spec = config.get_text("model");
  std::optional<models::Checkpoint> checkpoint;
  models::LoadedModel loaded = models::load_model(model_spec, class_count, &checkpoint);
  if (loaded.class_count != class_count) {  // pretrained weights for another class count: keep the backbone
    const auto pretrained = models::state_dict(*loaded.model.module);
    loaded.model = models::build_model(loaded.name, class_count, loaded.class_hidden);
    const std::size_t kept = load_matching(*loaded.model.module, pretrained);
    log::info("Transferred {}/{} tensors from {} (nc {} -> {})", kept, models::state_dict(*loaded.model.module).size(),
              loaded.weights.string(), loaded.class_count, class_count);
  }
  if (resume && !checkpoint) throw UsageError("resume=true needs model= pointing at a checkpoint (runs/train/exp/weights/last.pt)");
  const std::string family = loaded.name.family;
  models::DetectionModel& model = loaded.model;
  // PGI (YOLOv9): the auxiliary branch trains beside the main head, its losses added at aux_weight;
  // validation and inference use the main head only. A resumed run keeps the branch it was saved with.
  const auto* saved_train_model = resume ? checkpoint->extra("train_model") : nullptr;
  const models::NamedTensors train_weights = saved_train_model ? named_tensors(*saved_train_model) : models::NamedTensors{};
  bool use_aux = model.enable_aux && config.get_real("aux_weight") > 0;
  if (use_aux && resume) {
    const auto& source = saved_train_model ? train_weights : checkpoint->model;
    use_aux = std::any_of(source.begin(), source.end(), [](const auto& item) { return models::yolo9::is_aux_tensor(item.first); });
    if (!use_aux) log::info("Resuming a run saved without the PGI auxiliary branch: training on without it");
  }
  if (use_aux) model.enable_aux();
  const double aux_weight = use_aux ? config.get_real("aux_weight") : 0.0;
  if (saved_train_model) {
    models::load_state_dict(*model.module, std::map<std::string, at::Tensor>(train_weights.begin(), train_weights.end()), true);
  }
  model.module->to(device);
  model.module->train();
  const std::string layout = config.get_text("channels_last");
  // auto: measured per family on the CPU (see the option's help); not measured on a GPU yet
  const bool channels_last = layout == "true" || (layout == "auto" && device.is_cpu() && family == "yolo9");
  if (channels_last) models::to_channels_last(*model.module);
  log::info("{}: {} parameters, device {}{}", model.display_name,
            [&] { std::int64_t n = 0; for (const auto& p : model.module->parameters()) n += p.numel(); return n; }(),
            device.str(), channels_last ? ", channels-last" : "");

  std::unique_ptr<ModelEma> ema;
  models::DetectionModel ema_model;
  if (config.get_bool("ema")) {
    ema_model = models::build_model(loaded.name, class_count, loaded.class_hidden);
    if (use_aux) ema_model.enable_aux();
    ema_model.module->to(device);
    if (channels_last) models::to_channels_last(*ema_model.module);
    ema = std::make_unique<ModelEma>(*model.module, ema_model.module, config.get_real("ema_decay"), config.get_real("ema_tau"));
    if (resume) {
      std::map<std::string, at::Tensor> weights(checkpoint->model.begin(), checkpoint->model.end());
      models::load_state_dict(*ema_model.module, weights, true);
      if (const auto* updates = checkpoint->extra("ema_updates")) ema->set_updates(updates->toInt());
    }
  }

  // ------------------------------------------------------------------ optimizer, schedule, amp
  const auto groups = parameter_groups(*model.module);
  auto optimizer = make_optimizer(groups, {.name = config.get_text("optimizer"),
                                           .lr0 = config.get_real("lr0"),
                                           .momentum = config.get_real("momentum"),
                                           .nesterov = config.get_bool("nesterov"),
                                           .weight_decay = config.get_real("weight_decay")});
  log::info("Optimizer: {}", config.get_text("optimizer"));
  log::info("  - pg0 (BN): {} params", groups.bn.size());
  log::info("  - pg1 (Conv, wd={}): {} params", config.get_real("weight_decay"), groups.weights.size());
  log::info("  - pg2 (Bias): {} params", groups.biases.size());

  data::Loader loader([&](std::size_t index, int epoch, std::span<const std::size_t> batch) {
        return training.pipeline->sample(index, epoch, batch);
      },
      training.dataset->size(),
      {.batch_size = batch_size, .workers = workers, .shuffle = true, .seed = seed, .pin_memory = device.is_cuda()});
  const std::int64_t batches = static_cast<std::int64_t>(loader.batches_per_epoch());
  std::int64_t accumulate = 1;
  if (!config.is_none("nbs")) {
    accumulate = std::max<std::int64_t>(1, std::llround(static_cast<double>(config.get_int("nbs")) / batch_size));
  }
  const std::int64_t steps_per_epoch = (batches + accumulate - 1) / accumulate;
  const int no_aug_epochs = static_cast<int>(config.get_int("no_aug_epochs"));
  ScheduleOptions schedule_options{.kind = config.get_text("scheduler"),
                                   .lr0 = config.get_real("lr0"),
                                   .warmup_epochs = config.get_real("warmup_epochs"),
                                   .warmup_lr_start = config.get_real("warmup_lr_start"),
                                   .min_lr_ratio = config.get_real("min_lr_ratio"),
                                   .no_aug_epochs = no_aug_epochs,
                                   .steps_per_epoch = steps_per_epoch,
                                   .epochs = epochs,
                                   .warmup_momentum = std::nullopt,
                                   .momentum = config.get_real("momentum")};
  if (family == "yolo9") schedule_options.warmup_momentum = config.get_real("warmup_momentum");
  const Schedule schedule(schedule_options);

  const bool amp_requested = config.get_bool("amp");
  const std::string amp_dtype_name = config.get_text("amp_dtype");
  const c10::ScalarType amp_dtype = amp_dtype_name == "bfloat16" ? c10::kBFloat16 : c10::kHalf;
  bool autocast = false;
  if (amp_requested && device.is_cuda()) {
    if (amp_dtype == c10::kBFloat16 && !cuda_supports_bf16(device)) {
      throw UsageError(fmt::format("amp_dtype=bfloat16 needs a GPU with bfloat16 support; {} has none: use amp_dtype=float16",
                                   device.str()));
    }
    autocast = true;
    log::info("Using mixed precision training (AMP, dtype={})", amp_dtype_name);
  } else if (amp_requested && !device.is_cuda()) {
    if (amp_dtype == c10::kBFloat16 && cpu_has_bf16()) {
      autocast = true;
      log::info("Using CPU mixed precision (autocast bfloat16)");
    } else if (amp_dtype == c10::kBFloat16) {
      log::info("amp_dtype=bfloat16: this CPU has no native bfloat16 (avx512_bf16/amx); training in float32");
    } else if (config.source("amp") == config::Source::command_line) {
      log::info("amp on the CPU uses amp_dtype=bfloat16 only; training in float32");
    }
  }
  GradScaler scaler(autocast && device.is_cuda() && amp_dtype == c10::kHalf);
  const double clip = config.get_real("clip_max_norm");

  // ------------------------------------------------------------------ resume state
  int start_epoch = 0;
  std::int64_t start_batch = 0;
  double best_metric = -1, best_map50 = -1;
  int best_epoch = 0;
  if (resume) {
    const auto int_of = [&](const char* key, std::int64_t fallback) {
      const auto* v = checkpoint->extra(key);
      return v && v->isInt() ? v->toInt() : fallback;
    };
    const auto real_of = [&](const char* key, double fallback) {
      const auto* v = checkpoint->extra(key);
      return v && v->isDouble() ? v->toDouble() : (v && v->isInt() ? static_cast<double>(v->toInt()) : fallback);
    };
    start_epoch = static_cast<int>(int_of("epoch", -1)) + 1;
    start_batch = int_of("epoch_batches_done", 0);
    best_metric = real_of("best_mAP50_95", -1);
    best_map50 = real_of("best_mAP50", -1);
    best_epoch = static_cast<int>(int_of("best_epoch", 0));
    if (const auto* state = checkpoint->extra("optimizer")) load_optimizer_state(*optimizer, *state);
    if (const auto* s = checkpoint->extra("scaler"); s && s->isGenericDict()) {
      const auto d = s->toGenericDict();
      scaler.load_state({d.at("scale").toDouble(), d.at("growth_tracker").toInt()});
    }
    if (const auto* rng = checkpoint->extra("rng_state"); rng && rng->isGenericDict() && rng->toGenericDict().contains("torch")) {
      at::Generator generator = at::globalContext().defaultGenerator(c10::kCPU);
      generator.set_state(rng->toGenericDict().at("torch").toTensor());
    }
    if (start_epoch >= epochs) {
      throw UsageError(fmt::format("{} already finished all {} epochs; raise epochs= to train longer", loaded.weights.string(), epochs));
    }
    log::info("Resuming from {}: epoch {}{}", loaded.weights.string(), start_epoch + 1,
              start_batch ? fmt::format(", batch {}/{}", start_batch, batches) : "");
  }
  std::int64_t optimizer_steps = start_epoch * steps_per_epoch + start_batch / accumulate;
  const auto apply_schedule = [&](std::int64_t iteration) {
    set_learning_rate(*optimizer, schedule.lr(iteration));
    if (const auto m = schedule.momentum(iteration)) set_momentum(*optimizer, *m);
  };
  apply_schedule(optimizer_steps);

  std::unique_ptr<eval::Validator> validator;
  if (validate) {
    validator = std::make_unique<eval::Validator>(
        *val_dataset, eval::ValidatorOptions{.family = family, .batch_size = batch_size, .image_size = image_size,
                                             .confidence = 0.001, .iou = 0.65,
                                             .max_detections = static_cast<int>(config.get_int("max_det")),
                                             .workers = std::max(1, workers), .device = device});
  }
  RunFiles files(run_dir);
  if (resume) files.load_previous(start_epoch + 1);
  const fs::path weights_dir = run_dir / "weights";
  fs::create_directories(weights_dir);

  const std::vector<std::string> loss_names =
      family == "yolox" ? std::vector<std::string>{"iou_loss", "obj_loss", "cls_loss", "l1_loss"}
                        : std::vector<std::string>{"box_loss", "cls_loss", "dfl_loss"};
  models::yolo9::LossOptions yolo9_loss;
  yolo9_loss.box_gain = config.get_real("box");
  yolo9_loss.cls_gain = config.get_real("cls");
  yolo9_loss.dfl_gain = config.get_real("dfl");
  models::yolox::LossOptions yolox_loss;

  const int eval_interval = static_cast<int>(config.get_int("eval_interval"));
  const int save_period = static_cast<int>(config.get_int("save_period"));
  const int patience = static_cast<int>(config.get_int("patience"));
  Progress progress(config.get_bool("quiet"), loss_names);
  SignalScope signals;
  std::unique_ptr<profile::StepProfiler> profiler = make_profiler(config, run_dir, device, model.display_name, batch_size,
                                                                  image_size, autocast, amp_dtype_name, workers, accumulate);
  const bool profile_then_stop = profiler && config.get_bool("profile_then_stop");
  bool profiled_stop = false;

  double last_epoch_loss = std::nan("");
  // Running loss sums of the current epoch; saved with a mid-epoch last.pt so that the resumed
  // epoch reports the same means.
  std::vector<double> loss_sums(loss_names.size(), 0.0);
  double total_sum = 0;
  std::int64_t seen = 0;
  if (resume && start_batch > 0) {
    if (const auto* partial = checkpoint->extra("epoch_partial"); partial && partial->isGenericDict()) {
      const auto d = partial->toGenericDict();
      seen = d.at("seen").toInt();
      total_sum = d.at("total").toDouble();
      const auto parts = d.at("parts").toList();
      for (std::size_t i = 0; i < loss_sums.size() && i < parts.size(); ++i) loss_sums[i] = parts.get(i).toDouble();
    }
  }
  nlohmann::ordered_json last_metrics;
  const auto save_checkpoint = [&](const fs::path& path, int epoch_done, std::int64_t batches_done) {
    models::Checkpoint c;
    c.family = family;
    c.size = loaded.name.size;
    c.class_count = class_count;
    c.names = names;
    c.image_size = image_size;
    c.model = models::state_dict(ema ? *ema_model.module : *model.module);  // written detached, on the CPU
    c.set_extra("epoch", static_cast<std::int64_t>(epoch_done));
    if (batches_done) {
      c.set_extra("epoch_batches_done", batches_done);
      c10::impl::GenericDict partial(c10::StringType::get(), c10::AnyType::get());
      partial.insert("seen", seen);
      partial.insert("total", total_sum);
      c10::impl::GenericList parts(c10::FloatType::get());
      for (const double v : loss_sums) parts.push_back(v);
      partial.insert("parts", parts);
      c.set_extra("epoch_partial", partial);
    }
    c.set_extra("optimizer", optimizer_state(*optimizer));
    c.set_extra("train_model", state_dict_value(*model.module));
    c.set_extra("is_ema_weights", static_cast<bool>(ema));
    if (ema) c.set_extra("ema_updates", ema->updates());
    c.set_extra("best_mAP50_95", best_metric);
    c.set_extra("best_mAP50", best_map50);
    c.set_extra("best_epoch", static_cast<std::int64_t>(best_epoch));
    c.set_extra("best_metric_key", std::string("metrics/mAP50-95"));
    c.set_extra("best_metric_value", best_metric);
    if (std::isfinite(last_epoch_loss)) c.set_extra("loss", last_epoch_loss);
    c.set_extra("config", config_value(config));
    if (scaler.enabled()) {
      c10::impl::GenericDict s(c10::StringType::get(), c10::AnyType::get());
      const auto state = scaler.state();
      s.insert("scale", state.scale);
      s.insert("growth_tracker", state.growth_tracker);
      c.set_extra("scaler", s);
    }
    c10::impl::GenericDict rng(c10::StringType::get(), c10::AnyType::get());
    rng.insert("torch", torch::globalContext().defaultGenerator(c10::kCPU).get_state());
    c.set_extra("rng_state", rng);
    models::write_checkpoint(path, c);
  };
  const auto status = [&](const std::string& state, int epoch_done, double eta) {
    files.write_status({{"state", state}, {"epoch", epoch_done}, {"epochs", epochs},
                        {"elapsed_s", seconds_since(started)}, {"eta_s", eta}, {"best_epoch", best_epoch},
                        {"best_metric_name", "metrics/mAP50-95"}, {"best_metric", best_metric},
                        {"device", device.str()}, {"save_dir", run_dir.string()}});
  };
  status("running", start_epoch, -1);

  // Test hook: raise SIGINT after this many batches (exercises the real signal path).
  const char* stop_after = std::getenv("LIBREYOLO_STOP_AFTER_BATCHES");
  const std::int64_t stop_after_batches = stop_after ? std::atoll(stop_after) : -1;
  std::int64_t batches_this_process = 0;
  int exit_code = 0;
  int epoch = start_epoch;
  bool stopped_early = false;
  for (; epoch < epochs; ++epoch) {
    const auto epoch_start = Clock::now();
    const bool close_mosaic = epoch >= epochs - no_aug_epochs;
    training.pipeline->set_mosaic_enabled(!close_mosaic);
    if (close_mosaic && family == "yolox") yolox_loss.use_l1 = true;
    if (close_mosaic && epoch == epochs - no_aug_epochs) log::info("Closing mosaic and mixup for the last {} epochs{}", no_aug_epochs, family == "yolox" ? " (L1 loss on)" : "");
    model.module->train();
    const std::int64_t first_batch = epoch == start_epoch ? start_batch : 0;
    loader.start_epoch(epoch, static_cast<std::size_t>(first_batch));
    progress.print_header();
    if (epoch != start_epoch || first_batch == 0) {
      std::fill(loss_sums.begin(), loss_sums.end(), 0.0);
      total_sum = 0;
      seen = 0;
    }
    double wait_seconds = 0;
    std::int64_t images_seen = 0, done = first_batch;
    const auto work_start = Clock::now();
    std::string line;
    while (true) {
      const auto wait_start = Clock::now();
      if (profiler) profiler->before_fetch();
      auto batch = loader.next();
      if (profiler) profiler->after_fetch(batch.has_value());
      wait_seconds += seconds_since(wait_start);
      if (!batch) break;
      const std::int64_t b = batch->images.size(0);
      at::Tensor x;
      models::TargetBatch targets;
      {
        const auto phase = profile::scoped_phase(profiler.get(), "to_device");
        x = eval::network_input(batch->images, family, device);
        if (channels_last) x = x.contiguous(at::MemoryFormat::ChannelsLast);
        targets = models::pad_targets(batch->targets, b, x.size(3), x.size(2)).to(device);
      }
      const std::int64_t window_start = (done / accumulate) * accumulate;
      const std::int64_t window = std::min<std::int64_t>(accumulate, batches - window_start);
      if (done == window_start) optimizer->zero_grad(/*set_to_none=*/true);
      models::LossTerms terms;
      {
        const auto phase = profile::scoped_phase(profiler.get(), "forward");
        AutocastGuard guard(device.type(), amp_dtype, autocast);
        if (use_aux) {
          const auto [maps, aux_maps] = model.forward_aux(x);
          terms = models::yolo9::loss(maps, targets, yolo9_loss);
          const auto aux_terms = models::yolo9::loss(aux_maps, targets, yolo9_loss);
          terms.total = terms.total + aux_weight * aux_terms.total;  // LibreYOLO: every term main + w * aux
          for (auto& [name, value] : terms.parts) value = value + aux_weight * aux_terms.part(name);
        } else {
          const auto maps = model.forward(x);
          terms = family == "yolox" ? models::yolox::loss(maps, targets, yolox_loss)
                                    : models::yolo9::loss(maps, targets, yolo9_loss);
        }
      }
      const at::Tensor& total = terms.total;
      std::vector<at::Tensor> parts;
      for (const auto& n : loss_names) parts.push_back(terms.part(n));
      // one transfer for the logged values (the only sync of a step)
      std::vector<at::Tensor> logged{total.detach().reshape({}).to(at::kFloat)};
      for (const auto& p : parts) logged.push_back(p.reshape({}).to(at::kFloat));
      const at::Tensor values = at::stack(logged).cpu();
      const double loss_value = values[0].item<double>();
      if (!std::isfinite(loss_value)) {
        save_checkpoint(weights_dir / "last.pt", epoch - 1, done);
        status("failed", epoch, -1);
        throw RuntimeError(fmt::format("training diverged: the loss is {} at epoch {}, batch {}; {} holds the weights "
                                       "from before this step. Lower lr0, check the labels, or train in float32 (amp=false)",
                                       loss_value, epoch + 1, done + 1, (weights_dir / "last.pt").string()));
      }
      {
        const auto phase = profile::scoped_phase(profiler.get(), "backward");
        scaler.scale(total / static_cast<double>(window)).backward();
      }
      ++done;
      if (done - window_start == window) {
        {
          const auto phase = profile::scoped_phase(profiler.get(), "optimizer");
          if (clip > 0) {
            scaler.unscale(*optimizer);
            std::vector<at::Tensor> params;
            for (const auto& p : model.module->parameters()) if (p.grad().defined()) params.push_back(p);
            torch::nn::utils::clip_grad_norm_(params, clip);
          }
          scaler.step(*optimizer);
          scaler.update();
        }
        if (ema) ema->update(*model.module);
        ++optimizer_steps;
        apply_schedule(optimizer_steps);
      }
      total_sum += loss_value;
      for (std::size_t i = 0; i < parts.size(); ++i) loss_sums[i] += values[static_cast<std::int64_t>(i) + 1].item<double>();
      ++seen;
      images_seen += b;
      std::vector<double> means;
      for (const double s : loss_sums) means.push_back(s / seen);
      const double elapsed = seconds_since(work_start);
      const double memory = device.is_cuda() ? cuda::cuda_reserved_bytes(device.index()) / 1e9 : 0.0;
      line = progress.line(epoch + 1, epochs, memory, means, batch->targets.size(0), static_cast<int>(x.size(3)),
                           static_cast<std::size_t>(done), static_cast<std::size_t>(batches), elapsed,
                           images_seen / std::max(elapsed, 1e-9), wait_seconds / std::max(elapsed, 1e-9));
      progress.update(line, false);
      if (profiler && profiler->end_step()) {
        if (profile_then_stop) {
          progress.update(line, true);
          log::info("Profile-only run (profile_then_stop=true): training stopped after the profile window in {:.1f}s; the "
                    "partial epoch was not validated or checkpointed", seconds_since(started));
          profiled_stop = true;
          break;
        }
        log::info("Profile window complete; training continues (profile_then_stop=true stops here instead)");
      }
      if (++batches_this_process == stop_after_batches) std::raise(SIGINT);
      if (stop_signal && done - window_start == window) {
        progress.update(line, true);
        const bool epoch_finished = done == batches;
        save_checkpoint(weights_dir / "last.pt", epoch_finished ? epoch : epoch - 1, epoch_finished ? 0 : done);
        status("interrupted", epoch_finished ? epoch + 1 : epoch, -1);
        exit_code = stop_signal == SIGTERM ? 143 : 130;
        log::warn("{} received: saved {} (resume with model={} resume=true)", stop_signal == SIGTERM ? "SIGTERM" : "SIGINT",
                  (weights_dir / "last.pt").string(), (weights_dir / "last.pt").string());
        break;
      }
    }
    if (exit_code || profiled_stop) break;
    progress.update(line, true);
    const double epoch_seconds = seconds_since(epoch_start);
    const double data_share = wait_seconds / std::max(seconds_since(work_start), 1e-9);
    if (data_share > 0.3 && seen > 2) {
      log::warn("epoch {}: {:.0f}% of the time went to waiting for data (dataloader-bound): raise workers= or use cache=ram",
                epoch + 1, 100 * data_share);
    }
    last_epoch_loss = seen ? total_sum / seen : std::nan("");

    // validation
    const bool final_epoch = epoch + 1 == epochs;
    const bool run_validation = validator && ((eval_interval > 0 && (epoch + 1) % eval_interval == 0) || final_epoch);
    nlohmann::ordered_json row;
    row["epoch"] = epoch + 1;
    row["time"] = seconds_since(started);
    row["train/loss"] = last_epoch_loss;
    row["validated"] = run_validation;
    bool is_best = false;
    std::optional<eval::Validation> validation;
    if (run_validation) {
      models::DetectionModel& evaluated = ema ? ema_model : model;
      evaluated.module->eval();
      validation = validator->run([&](const at::Tensor& x) {
        AutocastGuard guard(device.type(), amp_dtype, autocast && device.is_cuda());
        return evaluated.forward(x);
      });
      model.module->train();
      const double metric = validation->coco.map50_95();
      is_best = std::isfinite(metric) && (best_epoch == 0 || metric > best_metric);
      if (is_best) {
        best_metric = metric;
        best_map50 = validation->coco.map50();
        best_epoch = epoch + 1;
      }
      const std::string table = eval::format_table(*validation, names);
      if (!config.get_bool("quiet")) fmt::print(stderr, "{}", table);
      log::to_file(table);
      log::info("Validation - mAP50: {:.4f}, mAP50-95: {:.4f} ({:.1f}s)", validation->coco.map50(), metric, validation->seconds);
    }
    row["is_best"] = is_best;
    row["current_metric"] = validation ? validation->coco.map50_95() : std::nan("");
    row["current_metric_name"] = "metrics/mAP50-95";
    row["best_metric"] = best_epoch ? best_metric : std::nan("");
    row["best_metric_name"] = "metrics/mAP50-95";
    row["best_epoch"] = best_epoch;
    for (std::size_t i = 0; i < loss_names.size(); ++i) row["train/" + loss_names[i]] = seen ? loss_sums[i] / seen : std::nan("");
    if (validation) {
      const auto& c = validation->coco;
      last_metrics = {{"metrics/mAP50-95", c.map50_95()}, {"metrics/mAP50", c.map50()}, {"metrics/mAP75", c.map75()},
                      {"metrics/precision", c.precision}, {"metrics/recall", c.recall}};
      for (const auto& item : last_metrics.items()) row[item.key()] = item.value();
    }
    for (std::size_t g = 0; g < optimizer->param_groups().size(); ++g) row[fmt::format("lr/group{}", g)] = learning_rate(*optimizer, g);
    row["epoch_time"] = epoch_seconds;
    row["data_wait_share"] = data_share;
    files.add_epoch(row);

    save_checkpoint(weights_dir / "last.pt", epoch, 0);
    if (is_best) {
      save_checkpoint(weights_dir / "best.pt", epoch, 0);
      log::info("New best model saved - Epoch {}: metrics/mAP50-95={:.4f}", epoch + 1, best_metric);
    }
    if (save_period > 0 && (epoch + 1) % save_period == 0) save_checkpoint(weights_dir / fmt::format("epoch_{}.pt", epoch + 1), epoch, 0);
    const double per_epoch = seconds_since(started) / (epoch + 1 - start_epoch);
    status("running", epoch + 1, per_epoch * (epochs - epoch - 1));
    if (patience > 0 && best_epoch > 0 && (epoch + 1) - best_epoch >= patience) {
      log::info("Stopping early: no improvement in mAP50-95 for {} epochs (best epoch {})", patience, best_epoch);
      stopped_early = true;
      ++epoch;
      break;
    }
    if (stop_signal) {  // arrived during validation or saving
      exit_code = stop_signal == SIGTERM ? 143 : 130;
      status("interrupted", epoch + 1, -1);
      break;
    }
  }
  const double hours = seconds_since(started) / 3600;
  nlohmann::ordered_json result;
  result["state"] = exit_code ? "interrupted" : profiled_stop ? "profiled" : "completed";
  result["epochs_completed"] = exit_code ? epoch : std::min(epoch, epochs);
  result["final_loss"] = last_epoch_loss;
  result["best_epoch"] = best_epoch;
  result["best_mAP50"] = best_map50;
  result["best_mAP50_95"] = best_metric;
  result["best_metric_key"] = "metrics/mAP50-95";
  result["val_metrics"] = last_metrics;
  result["stopped_early"] = stopped_early;
  result["save_dir"] = run_dir.string();
  result["last_checkpoint"] = (weights_dir / "last.pt").string();
  if (best_epoch) result["best_checkpoint"] = (weights_dir / "best.pt").string();
  result["seconds"] = seconds_since(started);
  if (profiler && profiler->result()) {
    result["profile"] = profiler->result()->profile_json.string();
    result["profile_bound"] = profiler->result()->bound;
  } else if (profiler) {
    log::warn("profile=true: the profile window (warmup {} + steps {}) never filled; train longer or lower profile_steps",
              profiler->options().warmup, profiler->options().steps);
  }
  if (profiled_stop) {
    status("profiled", epoch, 0);
  } else if (!exit_code) {
    status("completed", epoch, 0);
    log::info("Training complete: {} epochs in {:.3f}h", epoch - start_epoch, hours);
    if (best_epoch) log::info("Best mAP50: {:.4f}, mAP50-95: {:.4f} (epoch {})", best_map50, best_metric, best_epoch);
    log::info("Weights: {}", weights_dir.string());
  }
  return {result, exit_code};
}

}  // namespace libreyolo::train
