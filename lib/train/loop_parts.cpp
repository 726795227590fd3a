#include "train/loop_parts.h"

#include "core/log.h"
#include "train/amp.h"
#include "train/precise_bn.h"

#include <ATen/ATen.h>

#include <cmath>
#include <random>

namespace libreyolo::train {

namespace {

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

}  // namespace

std::optional<data::Batch> fetch(Training& t, HookList& hooks, EpochClock& clock) {
  const auto wait_start = Clock::now();
  hooks.before_fetch();
  auto batch = t.inputs.loader->next();
  hooks.after_fetch(batch.has_value());
  clock.wait_seconds += seconds_since(wait_start);
  return batch;
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
  for (models::Model* model : {&t.net.model(), t.net.ema ? &t.net.ema_model : nullptr}) {
    if (!model) continue;
    targets.push_back({model->module.get(), [&t, model](const at::Tensor& x) {
                         AutocastGuard guard(t.place.device.type(), t.precision.amp_dtype, t.precision.autocast);
                         if (t.net.use_branch) model->forward_branch(x); else model->forward(x);
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

}  // namespace libreyolo::train
