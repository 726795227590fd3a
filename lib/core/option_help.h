// Text generated from the option table: `libreyolo <command> --help` and the OPTIONS section of
// the man pages, so neither can drift from what the parser accepts.
#pragma once

#include "core/option_table.h"

#include <span>
#include <string>
#include <vector>

namespace libreyolo::config {

// The recipe defaults of a model family (or of one of its sizes), shown with the keys they set.
struct FamilyDefaults {
  std::string label;  // "yolo9", "yolox-n"
  std::vector<OptionDefault> defaults;
};

// `table`: every key (models::option_table()); a family's own key names the families it applies to.
std::string format_command_help(std::span<const OptionSpec> table, Command command, std::span<const FamilyDefaults> families = {});

// troff lines (.TP entries) for every key of `commands` (a bit set), grouped like the help; a
// key that other commands take too says which, and a key a family sets gives the family's value.
std::string format_man_options(std::span<const OptionSpec> table, unsigned command, std::span<const FamilyDefaults> families = {});

}  // namespace libreyolo::config
