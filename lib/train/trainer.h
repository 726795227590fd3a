// The training loop (LibreYOLO's order): per batch forward + loss under autocast, backward
// (scaled for float16), optional accumulation to `nbs` and gradient clipping, optimizer step,
// EMA update, per-iteration LR/momentum; per epoch the no-augmentation switch, validation on
// the EMA weights, run files and checkpoints (last / best / epoch_N), patience. SIGINT and
// SIGTERM save last.pt (with the position inside the epoch, so resume continues exactly) and
// end the run with 130 / 143.
#pragma once

#include "core/config.h"

#include <c10/core/Device.h>
#include <nlohmann/json.hpp>

#include <filesystem>

namespace libreyolo::train {

// device= as users write it: auto (first GPU, else CPU), cpu, 0, cuda:1. Throws UsageError for
// a missing GPU or a list (multi-GPU runs are launched differently).
c10::Device resolve_device(const std::string& text);

struct TrainOutcome {
  nlohmann::ordered_json result;  // the final result object (--json prints it)
  int exit_code = 0;              // 0, or 130 / 143 after SIGINT / SIGTERM
};

// `run_dir` exists and holds train_config.yaml. With resume=true, `model` is the checkpoint
// to continue from.
TrainOutcome run_training(const config::Config& config, const std::filesystem::path& run_dir);

}  // namespace libreyolo::train
