// The training loop, in LibreYOLO's order. Per epoch: the no-augmentation switch, the batches,
// then validation (EMA weights), run files, checkpoints (last / best / epoch_N) and patience.
// Per batch:
//
//   fetch ─► on_step_start ─► to_device ─► step runner (forward + loss, backward) ─► read losses (the one sync)
//     └─ at the end of an accumulation window (nbs): after_backward ─► before_optimizer_step ─►
//        stage lr/momentum/EMA decay ─► [unscale/clip ─► masked step ─► loss scale ─► EMA: one
//        graph under cuda_graph_scope=step] ─► LR/momentum for the next step
//   ─► progress ─► on_step_end ─► should_stop
//
// Hook points (train/hooks.h): on_train_start, before_fetch / after_fetch, on_step_start, on_phase_start/end
// (to_device, forward, backward, optimizer), after_backward, before_optimizer_step,
// on_step_end, should_stop, on_epoch_end, on_checkpoint, on_train_end. The profiler
// (profile/profiler_hook.h) attaches there; SIGINT / SIGTERM are a hook too: last.pt is saved at
// the end of the accumulation window (with the position inside the epoch, so resume continues
// exactly) and the run ends with 130 / 143.
#pragma once

#include "core/config.h"
#include "train/hooks.h"
#include "train/setup.h"

#include <nlohmann/json.hpp>

#include <filesystem>

namespace libreyolo::train {

struct TrainOutcome {
  nlohmann::ordered_json result;  // the final result object (--json prints it)
  int exit_code = 0;              // 0, or 130 / 143 after SIGINT / SIGTERM
};

// `run_dir` exists and holds train_config.yaml. With resume=true, `model` is the checkpoint
// to continue from. `hooks` are the optional features the caller attaches (the profiler).
// `dist`: the other ranks of a data-parallel run (null: one process); rank 0 alone writes the
// run folder and the console, and every rank reaches the same decisions.
TrainOutcome run_training(const config::Config& config, const std::filesystem::path& run_dir, HookList& hooks,
                          Collectives* dist = nullptr);

}  // namespace libreyolo::train
