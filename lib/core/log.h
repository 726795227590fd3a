// Console logging: progress and notes go to stderr so stdout stays for results (--json).
#pragma once

#include <fmt/core.h>

#include <string_view>
#include <utility>

namespace libreyolo::log {

void set_quiet(bool quiet);
bool quiet();
void write(std::string_view level, std::string_view message);

template <typename... Args>
void info(fmt::format_string<Args...> format, Args&&... args) {
  if (!quiet()) write("", fmt::format(format, std::forward<Args>(args)...));
}

template <typename... Args>
void warn(fmt::format_string<Args...> format, Args&&... args) {
  write("WARNING: ", fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace libreyolo::log
