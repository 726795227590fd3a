// The training profiler as a trainer hook (profile=true): the StepProfiler sees the data wait,
// the phases and the step ends; with profile_then_stop it ends the run after the window.
#pragma once

#include "core/config.h"
#include "train/collectives.h"
#include "train/hooks.h"

#include <memory>

namespace libreyolo::profile {

// Null when profile=false. Under data-parallel training every rank gets one (`collectives`): all
// profile the same window, rank 0 writes the artifacts with every rank's step time.
std::unique_ptr<train::TrainHook> make_profiler_hook(const config::Config& config, train::Collectives* collectives = nullptr);

}  // namespace libreyolo::profile
