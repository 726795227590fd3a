#include "core/log.h"

#include <atomic>
#include <cstdio>
#include <mutex>

namespace libreyolo::log {

namespace {
std::atomic<bool> quiet_flag{false};
std::mutex write_mutex;
}  // namespace

void set_quiet(bool quiet) { quiet_flag = quiet; }
bool quiet() { return quiet_flag; }

void write(std::string_view level, std::string_view message) {
  std::lock_guard<std::mutex> lock(write_mutex);
  fmt::print(stderr, "{}{}\n", level, message);
}

}  // namespace libreyolo::log
