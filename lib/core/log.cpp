#include "core/log.h"

#include <atomic>
#include <cstdio>
#include <mutex>

namespace libreyolo::log {

namespace {
std::atomic<bool> quiet_flag{false};
std::mutex write_mutex;
std::FILE* log_file = nullptr;
}  // namespace

void set_file(const std::string& path) {
  std::lock_guard<std::mutex> lock(write_mutex);
  if (log_file) std::fclose(log_file);
  log_file = std::fopen(path.c_str(), "a");
}

void clear_file() {
  std::lock_guard<std::mutex> lock(write_mutex);
  if (log_file) std::fclose(log_file);
  log_file = nullptr;
}

void to_file(std::string_view message) {
  std::lock_guard<std::mutex> lock(write_mutex);
  if (log_file) {
    fmt::print(log_file, "{}\n", message);
    std::fflush(log_file);
  }
}

void set_quiet(bool quiet) { quiet_flag = quiet; }
bool quiet() { return quiet_flag; }

void write(std::string_view level, std::string_view message) {
  std::lock_guard<std::mutex> lock(write_mutex);
  fmt::print(stderr, "{}{}\n", level, message);
  if (log_file) {
    fmt::print(log_file, "{}{}\n", level, message);
    std::fflush(log_file);
  }
}

}  // namespace libreyolo::log
