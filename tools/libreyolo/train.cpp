// `libreyolo train key=value ...`: resolve the configuration, prepare the run folder, train.
#include "commands.h"
#include "core/atomic_file.h"
#include "core/config.h"
#include "models/checkpoint.h"
#include "core/error.h"
#include "core/log.h"
#include "core/option_help.h"
#include "core/run_dir.h"
#include "data/dataset_yaml.h"
#include "data/training_data.h"
#include "dist/launch_env.h"
#include "profile/profiler_hook.h"
#include "train/trainer.h"

#include <filesystem>

#include <fmt/core.h>
#include <algorithm>

namespace libreyolo::cli {

namespace {

void require_data_argument(const std::string& data) {
  if (data.empty()) {
    throw UsageError("data= is required for train: give a data YAML (data=my_data.yaml) or a built-in dataset "
                     "(data=coco8, coco128, coco)");
  }
}

}  // namespace

int run_train(const Arguments& arguments) {
  if (wants_help(arguments)) {
    fmt::print("{}", config::format_command_help(config::command_train));
    return 0;
  }
  // Started as one rank of several (torchrun, srun): until the data-parallel trainer is wired in,
  // every rank would train alone and write its own run folder. Refused rather than done silently.
  if (const auto env = dist::resolve_launch_env(dist::process_environment()); env.distributed()) {
    throw UsageError(fmt::format("this process is rank {} of {} ({}): data-parallel training is not part of `libreyolo "
                                 "train` yet, and each rank would train alone; start one process (nproc_per_node=1)",
                                 env.rank, env.world_size, env.launcher));
  }
  Arguments given(arguments);
  auto config = models::parse_arguments(config::command_train, given);
  log::set_quiet(config.get_bool("quiet"));
  if (const std::string resume = config.get_text("resume"); resume != "true" && resume != "false") {
    // resume=runs/train/exp/weights/last.pt (Ultralytics): model= that checkpoint, resume=true
    given.insert(given.end(), {"model=" + resume, "resume=true"});
    config = models::parse_arguments(config::command_train, given);
  }
  if (config.get_text("resume") == "true") {
    // The run's own train_config.yaml first, then what this command line says.
    const auto run_config = std::filesystem::path(config.get_text("model")).parent_path().parent_path() / "train_config.yaml";
    if (!std::filesystem::exists(run_config)) {
      throw UsageError(fmt::format("resume=true: {} not found; give model=runs/train/<run>/weights/last.pt",
                                   run_config.string()));
    }
    Arguments with_run{"cfg=" + run_config.string()};
    with_run.insert(with_run.end(), given.begin(), given.end());
    config = models::parse_arguments(config::command_train, with_run);
  }
  for (const auto& note : config.notes()) log::info("{}", note);
  require_data_argument(config.get_text("data"));
  if (config.get_bool("dry_run")) {  // LibreYOLO: print the resolved configuration, load nothing
    fmt::print("{}", config.to_yaml());
    return 0;
  }
  // A wrong data= fails here, before a run folder is made.
  (void)data::load_dataset_spec(config.get_text("data"));
  const bool resume = config.get_text("resume") == "true";
  std::filesystem::path run_dir;
  bool created = false;  // by this command: removed again when training never started
  if (resume) {  // continue in the checkpoint's run folder: runs/train/exp/weights/last.pt -> runs/train/exp
    run_dir = std::filesystem::path(config.get_text("model")).parent_path().parent_path();
    if (run_dir.empty() || !std::filesystem::is_directory(run_dir)) {
      run_dir = create_run_dir(config.get_text("project"), config.get_text("name"), false);
      created = true;
    }
  } else {
    const bool existed = config.get_bool("exist_ok") &&
                         std::filesystem::exists(std::filesystem::path(config.get_text("project")) / config.get_text("name"));
    run_dir = create_run_dir(config.get_text("project"), config.get_text("name"), config.get_bool("exist_ok"));
    created = !existed;
  }
  const RunLock lock(run_dir);
  for (const auto& folder : {run_dir, run_dir / "weights"}) {
    if (const int stale = remove_stale_temporaries(folder)) log::info("Removed {} temporary file(s) a killed run left in {}", stale, folder.string());
  }
  if (!resume) write_file_atomically(run_dir / "train_config.yaml", config.to_yaml());
  log::info("Logging results to {}", run_dir.string());
  train::HookList hooks;
  if (auto profiler = profile::make_profiler_hook(config)) hooks.add(std::move(profiler));
  train::TrainOutcome outcome;
  try {
    outcome = train::run_training(config, run_dir, hooks);
  } catch (...) {
    // A command that fails before training starts (no GPU, batch=0, an empty image folder)
    // leaves no run folder behind.
    std::error_code ignored;
    if (created && !std::filesystem::exists(run_dir / "weights")) std::filesystem::remove_all(run_dir, ignored);
    throw;
  }
  if (config.get_bool("json")) fmt::print("{}\n", outcome.result.dump());
  return outcome.exit_code;
}

}  // namespace libreyolo::cli
