#include "train/signal_stop.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <csignal>
#include <cstring>

namespace libreyolo::train {

namespace {

std::atomic<int> stop_signal{0};

// The status a second signal writes, in fixed buffers (the handler may not allocate); two of them,
// so that the one being filled is never the one the handler may read.
struct PreparedStatus {
  std::array<char, 4096> path{}, temporary{};
  std::array<char, 16384> text{};
  std::size_t length = 0;
  std::array<char, 512> terminal{};  // the line the handler prints
  std::size_t terminal_length = 0;
};
std::array<PreparedStatus, 2> prepared;
std::atomic<int> prepared_index{-1};

void write_prepared_status() {
  const int index = prepared_index.load();
  if (index < 0) return;
  const PreparedStatus& p = prepared[static_cast<std::size_t>(index)];
  const int file = ::open(p.temporary.data(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (file < 0) return;
  const bool whole = ::write(file, p.text.data(), p.length) == static_cast<ssize_t>(p.length);
  ::close(file);
  if (whole) ::rename(p.temporary.data(), p.path.data());
  else ::unlink(p.temporary.data());
}

// The first signal asks for a save and a stop; a second one (Ctrl-C again during a slow save or
// validation) ends the process at once, status.json saying so. Only async-signal-safe calls here:
// open, write, close, rename, unlink and _exit.
extern "C" void on_stop_signal(int signal) {
  if (stop_signal.exchange(signal) == 0) return;
  static constexpr char message[] = "\nsecond stop signal: exiting now without saving\n";
  const int index = prepared_index.load();
  const char* line = index < 0 ? message : prepared[static_cast<std::size_t>(index)].terminal.data();
  const std::size_t length = index < 0 ? sizeof message - 1 : prepared[static_cast<std::size_t>(index)].terminal_length;
  [[maybe_unused]] const auto written = ::write(STDERR_FILENO, line, length);
  write_prepared_status();
  ::_exit(128 + signal);
}

}  // namespace

void prepare_second_signal_status(const std::filesystem::path& status_file, const std::string& text, const std::string& message) {
  const std::string path = status_file.string(), temporary = path + ".signal.tmp";
  const std::string terminal = "\nsecond stop signal: exiting now without saving; " + message + "\n";
  const int next = prepared_index.load() == 0 ? 1 : 0;
  PreparedStatus& p = prepared[static_cast<std::size_t>(next)];
  if (temporary.size() >= p.temporary.size() || text.size() > p.text.size() || terminal.size() > p.terminal.size()) {
    return;  // keep the older one
  }
  std::memcpy(p.path.data(), path.c_str(), path.size() + 1);
  std::memcpy(p.temporary.data(), temporary.c_str(), temporary.size() + 1);
  std::memcpy(p.text.data(), text.data(), text.size());
  p.length = text.size();
  std::memcpy(p.terminal.data(), terminal.data(), terminal.size());
  p.terminal_length = terminal.size();
  prepared_index.store(next);
}

void clear_second_signal_status() { prepared_index.store(-1); }

SignalStopHook::SignalStopHook() {
  stop_signal = 0;
  previous_int_ = std::signal(SIGINT, on_stop_signal);
  previous_term_ = std::signal(SIGTERM, on_stop_signal);
  previous_hup_ = std::signal(SIGHUP, on_stop_signal);  // a closed terminal: save and stop too
}

SignalStopHook::~SignalStopHook() {
  std::signal(SIGINT, previous_int_);
  std::signal(SIGTERM, previous_term_);
  std::signal(SIGHUP, previous_hup_);
}

std::optional<StopRequest> SignalStopHook::should_stop(const TrainState&) {
  const int signal = stop_signal.load();
  if (!signal) return std::nullopt;
  const char* name = signal == SIGTERM ? "SIGTERM" : signal == SIGHUP ? "SIGHUP" : "SIGINT";
  return StopRequest{.kind = StopRequest::Kind::interrupt, .exit_code = 128 + signal, .state = "interrupted",
                     .message = fmt::format("{} received", name)};
}

}  // namespace libreyolo::train
