// The loop's helpers (trainer.cpp): the epoch clock, fetching a batch, the network input of a
// batch (multi_scale's resizing), the finite-gradient check, precise BatchNorm, the best-model
// metric's value and a checkpoint's deep copy. Internal to lib/train.
#pragma once

#include "data/batch_source.h"
#include "eval/validator.h"
#include "models/checkpoint.h"
#include "train/hooks.h"
#include "train/setup.h"
#include "train/train_state.h"

#include <ATen/Tensor.h>
#include <torch/nn/module.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <cstdint>
#include <optional>
#include <string>

namespace libreyolo::train {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The epoch's timing for the progress line and the data-wait warning.
struct EpochClock {
  Clock::time_point start = Clock::now();
  double wait_seconds = 0;
  std::int64_t images = 0;
  double elapsed() const { return seconds_since(start); }
  double data_share() const { return wait_seconds / std::max(elapsed(), 1e-9); }
};

// The next batch from the loader, its wait timed into `clock` and reported to the hooks.
std::optional<data::Batch> fetch(Training& t, HookList& hooks, EpochClock& clock);

// The network input of a batch's uint8 images: the family's, resized by multi_scale (Ultralytics'
// range, or the family's listed sizes until its stop epoch), channels-last where the model is.
at::Tensor network_input(const Training& t, const at::Tensor& images, const TrainState& state);

// Whether every gradient is finite, as a device scalar (no sync here).
at::Tensor gradients_finite(torch::nn::Module& module);

// precise_bn=N on the final epoch: BatchNorm statistics of the trained and the EMA model from N
// training images of this epoch's order, before they are validated and saved (LibreYOLO's place).
void precise_batch_norm(Training& t, const TrainState& state, std::int64_t images);

// A deep copy of a checkpoint's tensors, without autograd (see loop_parts.cpp).
models::Checkpoint snapshot(models::Checkpoint c);

}  // namespace libreyolo::train
