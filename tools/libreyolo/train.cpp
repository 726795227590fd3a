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
  auto config = models::parse_arguments(config::command_train, arguments);
  log::set_quiet(config.get_bool("quiet"));
  if (config.get_text("resume") == "true") {
    // The run's own train_config.yaml first, then what this command line says.
    const auto run_config = std::filesystem::path(config.get_text("model")).parent_path().parent_path() / "train_config.yaml";
    if (!std::filesystem::exists(run_config)) {
      throw UsageError(fmt::format("resume=true: {} not found; give model=runs/train/<run>/weights/last.pt",
                                   run_config.string()));
    }
    Arguments with_run{"cfg=" + run_config.string()};
    with_run.insert(with_run.end(), arguments.begin(), arguments.end());
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
  if (resume) {  // continue in the checkpoint's run folder: runs/train/exp/weights/last.pt -> runs/train/exp
    run_dir = std::filesystem::path(config.get_text("model")).parent_path().parent_path();
    if (run_dir.empty() || !std::filesystem::is_directory(run_dir)) run_dir = create_run_dir(config.get_text("project"), config.get_text("name"), false);
  } else {
    run_dir = create_run_dir(config.get_text("project"), config.get_text("name"), config.get_bool("exist_ok"));
    write_file_atomically(run_dir / "train_config.yaml", config.to_yaml());
  }
  log::info("Logging results to {}", run_dir.string());
  train::HookList hooks;
  if (auto profiler = profile::make_profiler_hook(config)) hooks.add(std::move(profiler));
  const auto outcome = train::run_training(config, run_dir, hooks);
  if (config.get_bool("json")) fmt::print("{}\n", outcome.result.dump());
  return outcome.exit_code;
}

}  // namespace libreyolo::cli
