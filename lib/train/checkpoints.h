// A training checkpoint: the EMA (or raw) weights as `model`, the raw weights as `train_model`,
// the optimizer, scaler, RNG, config and the train state, in LibreYOLO's schema.
#pragma once

#include "models/checkpoint.h"
#include "train/setup.h"
#include "train/train_state.h"

namespace libreyolo::train {

// `epoch_done`: the last finished epoch (0-based, -1 for none); `batches_done`: the position
// inside the next one (0 at an epoch end).
models::Checkpoint make_checkpoint(Training& training, const TrainState& state, int epoch_done, std::int64_t batches_done);

// A checkpoint's `config`: every training key with its value typed as LibreYOLO's TrainConfig
// holds it (bool, int, float, str, list, None), which LibreYOLO acts on when it reads the file.
c10::IValue checkpoint_config(const config::Config& config);

}  // namespace libreyolo::train
