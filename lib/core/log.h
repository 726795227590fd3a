// Console logging: progress and notes go to stderr so stdout stays for results (--json).
#pragma once

#include <fmt/core.h>

#include <string>
#include <string_view>
#include <utility>

namespace libreyolo::log {

void set_quiet(bool quiet);
bool quiet();
void write(std::string_view level, std::string_view message);

// Every line written (quiet or not) is also appended to this file until cleared (train.log).
void set_file(const std::string& path);
void clear_file();
// A line for the file only (e.g. the per-epoch summary the progress bar shows live).
void to_file(std::string_view message);

template <typename... Args>
void info(fmt::format_string<Args...> format, Args&&... args) {
  const std::string message = fmt::format(format, std::forward<Args>(args)...);
  if (!quiet()) write("", message);
  else to_file(message);
}

template <typename... Args>
void warn(fmt::format_string<Args...> format, Args&&... args) {
  write("WARNING: ", fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace libreyolo::log
