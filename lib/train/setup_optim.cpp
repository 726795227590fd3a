#include "train/setup_stages.h"

#include "core/error.h"
#include "core/log.h"
#include "cuda/cuda_info.h"
#include "models/family.h"
#include "train/optimizer.h"

#include <fmt/format.h>

namespace libreyolo::train {

namespace {

bool cuda_supports_bf16(const c10::Device& device) {
  // Ampere (compute capability 8) and later run bfloat16 natively.
  for (const auto& d : cuda::query_cuda_info().devices) {
    if (d.index == device.index()) return d.compute_major >= 8;
  }
  return false;
}

}  // namespace

void set_up_optimizer(const config::Config& config, const TrainState& state, const Network& net, Optimisation& optim) {
  if (config.get_text("optimizer") == "sgd" && config.get_bool("nesterov") && config.get_real("momentum") <= 0) {
    throw UsageError(fmt::format("nesterov=true needs momentum > 0 (momentum={}); set a momentum such as 0.937, or nesterov=false",
                                 config.get_real("momentum")));
  }
  const auto groups = parameter_groups(*net.model().module, net.family->parameter_rules(config));
  optim.lr_multipliers = groups.lr_multipliers();
  optim.bias_group = groups.bias_group();
  optim.warmup_bias_lr = config.get_real("warmup_bias_lr");
  const double weight_decay = config.get_real("weight_decay") * state.weight_decay_scale;
  optim.optimizer = make_optimizer(groups, {.name = config.get_text("optimizer"),
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
  if (net.family->warms_up_momentum()) schedule_options.warmup_momentum = config.get_real("warmup_momentum");
  optim.schedule.emplace(schedule_options);
  optim.clip = config.get_real("clip_max_norm");
}

void set_up_amp(const config::Config& config, const Placement& place, const Network& net, Precision& precision) {
  const bool amp_requested = config.get_bool("amp");
  const std::string amp_dtype_name = config.get_text("amp_dtype");
  precision.amp_dtype = amp_dtype_name == "bfloat16" ? c10::kBFloat16 : c10::kHalf;
  if (amp_requested && place.device.is_cuda()) {
    if (precision.amp_dtype == c10::kBFloat16 && !cuda_supports_bf16(place.device)) {
      throw UsageError(fmt::format("amp_dtype=bfloat16 needs a GPU with bfloat16 support; {} has none: use amp_dtype=float16",
                                   place.device.str()));
    }
    precision.autocast = true;
    log::info("Using mixed precision training (AMP, dtype={})", amp_dtype_name);
  } else if (amp_requested && !place.device.is_cuda()) {
    if (precision.amp_dtype == c10::kBFloat16 && cpu_has_bf16()) {
      precision.autocast = true;
      if (precision.cpu_bf16_speedup) {
        const CpuBf16Note note = cpu_bf16_note(*precision.cpu_bf16_speedup, cpu_has_amx());
        if (note.warn) {
          log::warn("{}", note.line);
        } else {
          log::info("{}", note.line);
        }
      } else {
        log::info("Using CPU mixed precision (autocast bfloat16)");
      }
    } else if (precision.amp_dtype == c10::kBFloat16) {
      log::info("amp_dtype=bfloat16: this CPU has no native bfloat16 (avx512_bf16/amx); training in float32");
    } else if (config.source("amp") == config::Source::command_line) {
      log::info("amp on the CPU uses amp_dtype=bfloat16 only; training in float32");
    }
  }
  precision.scaler = std::make_unique<GradScaler>(precision.autocast && place.device.is_cuda() && precision.amp_dtype == c10::kHalf);
  if (net.family) {  // the family's word on its precision (D-FINE: why AMP is off, float16's range)
    const auto note = net.family->precision_note(amp_requested, precision.amp_dtype == c10::kHalf);
    if (note.warning) {
      log::warn("{}", note.text);
    } else if (!note.text.empty()) {
      log::info("{}", note.text);
    }
  }
}

}  // namespace libreyolo::train
