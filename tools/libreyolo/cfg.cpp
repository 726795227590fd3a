// `libreyolo cfg [train|val|predict] [key=value ...]`: every key with its resolved value and
// where it came from (default, family, cfg file, command line).
#include "commands.h"
#include "core/config.h"
#include "models/family.h"
#include "models/checkpoint.h"
#include "core/option_help.h"

#include <fmt/core.h>
#include <nlohmann/json.hpp>

namespace libreyolo::cli {

namespace {

config::Command command_from_word(const std::string& word, bool& matched) {
  matched = true;
  if (word == "train") return config::command_train;
  if (word == "val") return config::command_val;
  if (word == "predict") return config::command_predict;
  matched = false;
  return config::command_train;
}

}  // namespace

int run_cfg(const Arguments& arguments) {
  Arguments rest = arguments;
  bool matched = false;
  const config::Command command = rest.empty() ? config::command_train : command_from_word(rest.front(), matched);
  if (matched) rest.erase(rest.begin());
  for (const auto& argument : rest) {
    if (argument == "--help" || argument == "-h") {
      fmt::print("usage: libreyolo cfg [train|val|predict] [key=value ...]\n"
                 "Prints every key of the command with its resolved value and its source; a family's own key\n"
                 "also names the families that read it.\n");
      return 0;
    }
  }
  const auto resolved = models::parse_arguments(command, rest);
  if (resolved.get_bool("json")) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& spec : resolved.table()) {
      if (spec.commands & command) out[std::string(spec.name)] = config::format_value(resolved.value(spec.name));
    }
    fmt::print("{}\n", out.dump(2));
    return 0;
  }
  fmt::print("# libreyolo {} configuration{}\n", config::command_name(command),
             resolved.family().empty() ? "" : fmt::format(" for {}-{}", resolved.family(), resolved.size()));
  for (const auto& note : resolved.notes()) fmt::print("# {}\n", note);
  for (const auto& spec : resolved.table()) {
    if (!(spec.commands & command)) continue;
    // a family's own key: the families it applies to, and whether this model's reads it
    std::string owners;
    if (!spec.families.empty()) {
      owners = fmt::format("  [{}{}]", spec.families,
                           config::applies_to(spec, resolved.family()) ? "" : fmt::format("; not read by {}", resolved.family()));
    }
    fmt::print("{:<24} {:<20} {}{}\n", spec.name, config::format_value(resolved.value(spec.name)),
               config::source_name(resolved.source(spec.name)), owners);
  }
  return 0;
}

// Every key of the table (the train page documents them all), for man/libreyolo-train.1.
int run_man_options(const Arguments&) {
  fmt::print("{}", models::man_options());
  return 0;
}

}  // namespace libreyolo::cli
