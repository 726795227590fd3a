#include "train/setup_stages.h"

#include "core/error.h"
#include "core/log.h"
#include "models/family.h"
#include "nn/sync_norm.h"
#include "train/sync_batch_norm.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace libreyolo::train {

namespace {

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

}  // namespace

void set_up_model(const config::Config& config, const Placement& place, const Inputs& inputs,
                  std::optional<models::Checkpoint>& checkpoint, Network& net) {
  models::LoadedModel& loaded = net.loaded;
  loaded = models::load_model(config.get_text("model"), inputs.class_count, &checkpoint, /*note_dropped=*/!place.resume);
  if (loaded.class_count != inputs.class_count) {  // pretrained weights for another class count: keep the backbone
    const auto pretrained = models::state_dict(*loaded.model.module);
    loaded.model = models::build_model(loaded.name, inputs.class_count, loaded.class_hidden);
    loaded.fine_tune = false;  // the form is chosen below
    const std::size_t kept = load_matching(*loaded.model.module, pretrained);
    log::info("Transferred {}/{} tensors from {} (nc {} -> {})", kept, models::state_dict(*loaded.model.module).size(),
              loaded.weights.string(), loaded.class_count, inputs.class_count);
  }
  if (place.resume && !checkpoint) throw UsageError("resume=true needs model= pointing at a checkpoint (runs/train/exp/weights/last.pt)");
  const std::string pretrained = config.get_text("pretrained");
  // A resumed run's train_config.yaml repeats the pretrained= it started from: its weights are in
  // the checkpoint now. Only a pretrained= given with resume=true on the command line is refused.
  if (pretrained != "true" && pretrained != "false" && place.resume && config.source("pretrained") == config::Source::cfg_file) {
    log::info("resume=true: continuing the run's own weights (it started from pretrained={})", pretrained);
  } else if (pretrained != "true" && pretrained != "false") {  // weights by name and shape from another file
    if (place.resume) throw UsageError(fmt::format("pretrained={} cannot be combined with resume=true: a resumed run continues its own weights", pretrained));
    const models::Checkpoint source = models::read_checkpoint(pretrained);
    const std::size_t kept = load_matching(*loaded.model.module, source.model);
    log::info("pretrained={}: transferred {}/{} tensors (matched by name and shape)", pretrained, kept,
              models::state_dict(*loaded.model.module).size());
  } else if (pretrained == "true" && !place.resume && loaded.weights.empty() &&
             config.source("pretrained") != config::Source::table_default) {
    log::warn("pretrained=true: model={} is an architecture, not a weights file, so {} trains from scratch; give "
              "model=<weights>.pt (or pretrained=<weights>.pt) to start from weights", config.get_text("model"),
              loaded.model.display_name);
  } else if (pretrained == "false" && !place.resume && !loaded.weights.empty()) {
    loaded.model = models::build_model(loaded.name, inputs.class_count, loaded.class_hidden);
    loaded.fine_tune = false;
    log::info("pretrained=false: training {} from scratch; the weights in {} are not loaded", loaded.model.display_name,
              loaded.weights.string());
  }
  net.family = &models::family(loaded.name.family);
  // Training from weights (a weights file, pretrained=<path>), the family's fine-tune form, as
  // LibreYOLO builds a model it loads weights into (RT-DETR: the stem frozen); a resumed run keeps
  // the form it started in, which load_model read from the checkpoint's mark (none: from scratch,
  // the only form before).
  const bool from_weights = place.resume ? loaded.fine_tune
                                           : pretrained != "false" && (!loaded.weights.empty() || pretrained != "true");
  const std::string form = net.family->fine_tune_form(loaded.name.size);
  if (const bool fine_tune = from_weights && !form.empty(); fine_tune != loaded.fine_tune) {
    const auto weights = models::state_dict(*loaded.model.module);
    loaded.model = models::build_model(loaded.name, inputs.class_count, loaded.class_hidden, fine_tune);
    loaded.fine_tune = fine_tune;
    load_matching(*loaded.model.module, weights);
  }
  if (loaded.fine_tune) log::info("{} from weights: {} (LibreYOLO's fine-tune form)", loaded.model.display_name, form);
  models::Model& model = loaded.model;
  // A training-only branch (YOLOv9's PGI) trains beside the main head, the family's loss adding its
  // terms; validation and inference use the main head only. A resumed run keeps the branch it was saved with.
  const auto* saved_train_model = place.resume ? checkpoint->extra("train_model") : nullptr;
  const models::NamedTensors train_weights = saved_train_model ? models::tensors_of(*saved_train_model) : models::NamedTensors{};
  net.use_branch = model.enable_branch && net.family->trains_branch(config);
  if (net.use_branch && place.resume) {
    const auto& source = saved_train_model ? train_weights : checkpoint->model;
    net.use_branch = std::any_of(source.begin(), source.end(), [&](const auto& item) { return net.family->is_training_only_tensor(item.first); });
    if (!net.use_branch) log::info("Resuming a run saved without {}: training on without it", net.family->training_only_branch());
  }
  if (net.use_branch) model.enable_branch();
  if (saved_train_model) {
    models::load_state_dict(*model.module, std::map<std::string, at::Tensor>(train_weights.begin(), train_weights.end()), true);
  }
  net.frozen = freeze_layers(*model.module, config.get_text("freeze"), net.family->freeze_groups(net.use_branch));
  if (const auto* boxes = inputs.data.detection_dataset(); boxes && !place.resume) {
    const std::string fitted = net.family->fit_to_labels(*model.module, *boxes, inputs.image_size, config);
    if (!fitted.empty()) log::info("{}", fitted);
  }
  model.module->to(place.device);
  net.set_train_mode();
  if (place.dist && config.get_bool("sync_bn")) {
    const std::size_t layers = nn::set_batch_norm_sync(*model.module, std::make_shared<SyncBatchNorm>(*place.dist));
    log::info("sync_bn: {} BatchNorm layers normalise over the global batch of {} processes{}", layers, place.world_size(),
              place.device.is_cpu() ? std::string(" (2 small all-reduces per layer and step; over Gloo they can cost more than the "
                                              "step itself: sync_bn=false averages the statistics before validation instead)")
                                : std::string());
  } else if (place.dist && place.batch_size < 16) {  // LibreYOLO's warning
    log::warn("sync_bn=false with {} images per process: BatchNorm statistics come from small batches; sync_bn=true "
              "computes them over the global batch", place.batch_size);
  }
  const std::string layout = config.get_text("channels_last");
  // auto: measured per family on the CPU (see the option's help); not measured on a GPU yet
  net.channels_last = layout == "true" || (layout == "auto" && place.device.is_cpu() && net.family->channels_last_on_cpu());
  if (net.channels_last) models::to_channels_last(*model.module);
  std::int64_t parameters = 0;
  for (const auto& p : model.module->parameters()) parameters += p.numel();
  log::info("{}: {} parameters, device {}{}", model.display_name, parameters, place.device.str(), net.channels_last ? ", channels-last" : "");

  if (config.get_bool("ema")) {
    net.ema_model = models::build_model(loaded.name, inputs.class_count, loaded.class_hidden, loaded.fine_tune);
    if (net.use_branch) net.ema_model.enable_branch();
    net.ema_model.module->to(place.device);
    if (net.channels_last) models::to_channels_last(*net.ema_model.module);
    net.ema = std::make_unique<ModelEma>(*model.module, net.ema_model.module, config.get_real("ema_decay"), config.get_real("ema_tau"));
    if (place.resume) {
      std::map<std::string, at::Tensor> weights(checkpoint->model.begin(), checkpoint->model.end());
      models::load_state_dict(*net.ema_model.module, weights, true);
      if (const auto* updates = checkpoint->extra("ema_updates")) net.ema->set_updates(updates->toInt());
    }
  }
  models::GlobalNormaliser global_normaliser;
  models::GlobalShare global_share;
  if (place.dist) {
    global_normaliser = [dist = place.dist](const at::Tensor& local) {
      at::Tensor total = local.detach().to(at::kFloat).clone();
      dist->sum(total);
      return total.clamp_min(1.0) / dist->world_size();
    };
    global_share = [dist = place.dist](const at::Tensor& local) {
      at::Tensor total = local.detach().to(at::kFloat).clone();
      dist->sum(total);
      return total / dist->world_size();
    };
    *model.batch_share = {.rank = place.dist->rank(), .world_size = place.dist->world_size(),
                          .global_max = [dist = place.dist](std::int64_t local) {
                            at::Tensor value = at::scalar_tensor(static_cast<double>(local), at::kDouble);
                            dist->max(value);
                            return static_cast<std::int64_t>(value.item<double>());
                          }};
  }
  net.loss = net.family->make_loss({.image_size = inputs.image_size, .world_size = place.world_size(),
                                        .classes = inputs.class_count, .global_normaliser = global_normaliser,
                                        .global_share = global_share, .training_branch = net.use_branch},
                                       config);
}

}  // namespace libreyolo::train
