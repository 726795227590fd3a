// `libreyolo train key=value ...`: resolve the configuration, prepare the run folder, train.
#include "commands.h"
#include "core/atomic_file.h"
#include "core/config.h"
#include "core/error.h"
#include "core/log.h"
#include "core/option_help.h"
#include "core/run_dir.h"

#include <fmt/core.h>
#include <fmt/std.h>

#include <array>
#include <filesystem>

namespace libreyolo::cli {

namespace {

bool wants_help(const Arguments& arguments) {
  for (const auto& argument : arguments) {
    if (argument == "--help" || argument == "-h" || argument == "help") return true;
  }
  return false;
}

void require_data_argument(const std::string& data) {
  if (data.empty()) {
    throw UsageError("data= is required for train: give a data YAML (data=my_data.yaml) or a built-in dataset "
                     "(data=coco8, coco128, coco)");
  }
}

// Built-in names resolve in the data module; anything else must be a file or folder now.
void check_data_exists(const std::string& data) {
  constexpr std::array<std::string_view, 6> builtin{"coco8", "coco128", "coco", "coco8.yaml", "coco128.yaml", "coco.yaml"};
  for (const auto name : builtin) {
    if (data == name) return;
  }
  if (!std::filesystem::exists(data)) {
    throw DataError(fmt::format("data={}: no such file or folder; give a data YAML path or a built-in dataset "
                                "(coco8, coco128, coco)", data));
  }
}

}  // namespace

int run_train(const Arguments& arguments) {
  if (wants_help(arguments)) {
    fmt::print("{}", config::format_command_help(config::command_train));
    return 0;
  }
  const auto config = config::Config::from_arguments(config::command_train, arguments);
  log::set_quiet(config.get_bool("quiet"));
  for (const auto& note : config.notes()) log::info("{}", note);
  require_data_argument(config.get_text("data"));
  if (config.get_bool("dry_run")) {  // LibreYOLO: print the resolved configuration, load nothing
    fmt::print("{}", config.to_yaml());
    return 0;
  }
  check_data_exists(config.get_text("data"));
  const auto run_dir = create_run_dir(config.get_text("project"), config.get_text("name"), config.get_bool("exist_ok"));
  write_file_atomically(run_dir / "train_config.yaml", config.to_yaml());
  log::info("Logging results to {}", run_dir.string());
  throw RuntimeError(fmt::format("the training loop is not built yet; {} holds the resolved train_config.yaml",
                                 run_dir.string()));
}

}  // namespace libreyolo::cli
