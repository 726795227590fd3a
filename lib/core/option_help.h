// Text generated from the option table: `libreyolo <command> --help` and the OPTIONS section of
// the man pages, so neither can drift from what the parser accepts.
#pragma once

#include "core/option_table.h"

#include <string>

namespace libreyolo::config {

std::string format_command_help(Command command);

// troff lines (.TP entries) for every key of `commands` (a bit set), grouped like the help; a
// key that other commands take too says which.
std::string format_man_options(unsigned command);

}  // namespace libreyolo::config
