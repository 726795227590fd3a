#include "dist/spawn.h"

#include "core/error.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <deque>

namespace libreyolo::dist {

namespace {

std::atomic<int> received_signal{0};
extern "C" void on_launcher_signal(int signal) { received_signal = signal; }

struct Rank {
  int rank = 0;
  pid_t pid = -1;
  int output = -1;          // read end of the rank's stdout+stderr
  std::string partial;      // a line not yet ended
  std::deque<std::string> tail;
  bool running = true;
  int exit_code = 0;
  bool failed = false;       // ended with an error before the launcher stopped it
  bool stopped_on_signal = false;  // exited by itself with 129/130/143: a stop signal of its own, saved
  bool stopped_by_launcher = false;  // SIGKILLed after it did not end when asked
};

bool is_stop_code(int code) { return code == 128 + SIGINT || code == 128 + SIGTERM || code == 128 + SIGHUP; }

// Every rank that loses its peer says this (dist/collectives.h, lost_peer_message).
bool only_lost_contact(const Rank& r) {
  return std::any_of(r.tail.begin(), r.tail.end(),
                     [](const std::string& line) { return line.find(" lost contact with another rank") != std::string::npos; });
}

std::string signal_name(int signal) {
  switch (signal) {
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGSEGV: return "SIGSEGV";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGHUP: return "SIGHUP";
    case SIGPIPE: return "SIGPIPE";
    default: return fmt::format("signal {}", signal);
  }
}

// Which rank the failure is: the first to fail by itself, else one that had to be killed because it
// did not answer (a hang: its peers lost contact first), else the first to fail.
const Rank* blamed_rank(const std::vector<const Rank*>& failures, const std::vector<Rank>& ranks) {
  for (const Rank* r : failures) {
    if (!only_lost_contact(*r)) return r;
  }
  for (const Rank& r : ranks) {
    if (r.stopped_by_launcher) return &r;
  }
  return failures.empty() ? nullptr : failures.front();
}

std::string failure_message(const Rank& r, int world) {
  if (r.stopped_by_launcher && !r.failed) {
    return fmt::format("rank {} stopped responding: its peers lost contact with it (dist_timeout) and it did not end when "
                       "asked, so it was killed; the other ranks were stopped. Its last lines:{}",
                       r.rank, r.tail.empty() ? std::string(" none") : "");
  }
  std::string how = fmt::format("rank {} failed with exit code {}; the other ranks were stopped.", r.rank, r.exit_code);
  if (r.exit_code > 128) how += fmt::format(" It was killed by {}.", signal_name(r.exit_code - 128));
  if (r.tail.empty()) {
    return how + (r.rank == 0 ? " It printed nothing." :
                  fmt::format(" It printed nothing (ranks other than 0 print only warnings and errors; {} of {} ran)",
                              r.rank, world));
  }
  return how + " Its last lines:";
}

void emit(Rank& r, const std::string& line, int tail_lines) {
  if (r.rank == 0) fmt::print(stderr, "{}\n", line);  // the console: where training reports progress
  else fmt::print(stderr, "[rank {}] {}\n", r.rank, line);
  r.tail.push_back(line);
  if (static_cast<int>(r.tail.size()) > tail_lines) r.tail.pop_front();
}

void drain(Rank& r, int tail_lines) {
  char buffer[4096];
  while (r.output >= 0) {
    const ssize_t n = ::read(r.output, buffer, sizeof buffer);
    if (n > 0) {
      r.partial.append(buffer, static_cast<std::size_t>(n));
      for (std::size_t end; (end = r.partial.find('\n')) != std::string::npos;) {
        emit(r, r.partial.substr(0, end), tail_lines);
        r.partial.erase(0, end + 1);
      }
      if (n < static_cast<ssize_t>(sizeof buffer)) return;
    } else {
      if (n < 0 && (errno == EINTR)) continue;
      if (n < 0 && errno == EAGAIN) return;
      if (!r.partial.empty()) emit(r, r.partial, tail_lines);
      r.partial.clear();
      ::close(r.output);
      r.output = -1;
    }
  }
}

}  // namespace

int pick_free_port(const std::string& address) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw RuntimeError(fmt::format("cannot open a socket to find a free port: {}", std::strerror(errno)));
  sockaddr_in socket_address{};
  socket_address.sin_family = AF_INET;
  socket_address.sin_port = 0;
  if (::inet_pton(AF_INET, address.c_str(), &socket_address.sin_addr) != 1) socket_address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof socket_address;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&socket_address), sizeof socket_address) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&socket_address), &length) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    throw RuntimeError(fmt::format("cannot find a free port on {}: {}; pass master_port=", address, why));
  }
  ::close(fd);
  return ntohs(socket_address.sin_port);
}

int spawn_ranks(const std::vector<std::string>& argv, const SpawnOptions& options) {
  if (argv.empty()) throw UsageError("spawn_ranks: no program to run");
  if (options.nproc < 1 || options.nnodes < 1 || options.node_rank < 0 || options.node_rank >= options.nnodes) {
    throw UsageError(fmt::format("nproc_per_node={} nnodes={} node_rank={}: need nproc_per_node >= 1 and 0 <= node_rank < nnodes",
                                 options.nproc, options.nnodes, options.node_rank));
  }
  const int port = options.master_port > 0 ? options.master_port : pick_free_port(options.master_addr);
  const int world = options.nproc * options.nnodes;
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);

  received_signal = 0;
  auto previous_int = std::signal(SIGINT, on_launcher_signal);
  auto previous_term = std::signal(SIGTERM, on_launcher_signal);
  std::vector<Rank> ranks(static_cast<std::size_t>(options.nproc));
  for (int local = 0; local < options.nproc; ++local) {
    Rank& r = ranks[static_cast<std::size_t>(local)];
    r.rank = options.node_rank * options.nproc + local;
    int pipe_ends[2];
    if (::pipe(pipe_ends) != 0) throw RuntimeError(fmt::format("cannot start rank {}: {}", r.rank, std::strerror(errno)));
    const pid_t pid = ::fork();
    if (pid == 0) {
      // A process group of its own: a terminal's Ctrl-C reaches the launcher only, which forwards it
      // once (a rank that got it twice would exit without saving), and a signal reaches the rank's
      // children too.
      ::setpgid(0, 0);
      // rank 0's stdout stays the launcher's (results such as json=true); everything else is relayed
      if (r.rank != 0) ::dup2(pipe_ends[1], STDOUT_FILENO);
      ::dup2(pipe_ends[1], STDERR_FILENO);
      ::close(pipe_ends[0]);
      ::close(pipe_ends[1]);
      std::signal(SIGINT, SIG_DFL);
      std::signal(SIGTERM, SIG_DFL);
      ::setenv("RANK", std::to_string(r.rank).c_str(), 1);
      ::setenv("WORLD_SIZE", std::to_string(world).c_str(), 1);
      ::setenv("LOCAL_RANK", std::to_string(local).c_str(), 1);
      ::setenv("LOCAL_WORLD_SIZE", std::to_string(options.nproc).c_str(), 1);
      ::setenv("GROUP_RANK", std::to_string(options.node_rank).c_str(), 1);
      ::setenv("MASTER_ADDR", options.master_addr.c_str(), 1);
      ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      ::execv(args[0], args.data());
      std::fprintf(stderr, "cannot run %s: %s\n", args[0], std::strerror(errno));
      ::_exit(127);
    }
    ::close(pipe_ends[1]);
    if (pid < 0) throw RuntimeError(fmt::format("cannot start rank {}: {}", r.rank, std::strerror(errno)));
    ::setpgid(pid, pid);  // also here: no signal may come before the child has done it
    ::fcntl(pipe_ends[0], F_SETFL, ::fcntl(pipe_ends[0], F_GETFL) | O_NONBLOCK);
    r.pid = pid;
    r.output = pipe_ends[0];
  }

  int forwarded = 0;
  std::vector<const Rank*> failures;  // in the order the launcher saw them end with an error
  const Rank* first_stopped = nullptr;  // the first to exit by itself on a stop signal
  auto stop_deadline = std::chrono::steady_clock::time_point::max();
  bool killed = false;
  const auto signal_all = [&](int signal) {
    for (auto& r : ranks) if (r.running) ::kill(-r.pid, signal);
  };
  while (true) {
    std::vector<pollfd> fds;
    std::vector<Rank*> owners;
    for (auto& r : ranks) {
      if (r.output >= 0) {
        fds.push_back({r.output, POLLIN, 0});
        owners.push_back(&r);
      }
    }
    if (!fds.empty()) ::poll(fds.data(), fds.size(), 100);
    else ::usleep(100 * 1000);
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) drain(*owners[i], options.tail_lines);
    }
    if (const int signal = received_signal.load(); signal && !forwarded) {  // Ctrl-C or SIGTERM: every rank saves and stops
      forwarded = signal;
      signal_all(signal);
    }
    for (auto& r : ranks) {
      if (!r.running) continue;
      int status = 0;
      if (::waitpid(r.pid, &status, WNOHANG) != r.pid) continue;
      r.running = false;
      r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      // A rank that got SIGINT/SIGTERM/SIGHUP itself (not from us) saves, tells the others, and exits
      // with 128 + the signal: a stop every rank agreed on, not a failure (the others stop at their
      // next step, or lose contact and fail by themselves). One killed by the signal before its
      // handler was set ends by the signal instead, and that is a failure.
      r.stopped_on_signal = WIFEXITED(status) && is_stop_code(r.exit_code);
      if (r.stopped_on_signal && first_stopped == nullptr) first_stopped = &r;  // the rank the signal came to
      drain(r, options.tail_lines);  // what it wrote last; a leftover child of its own may hold the pipe open
      if (r.output >= 0) {
        if (!r.partial.empty()) emit(r, r.partial, options.tail_lines);
        r.partial.clear();
        ::close(r.output);
        r.output = -1;
      }
      // a failure: the first non-zero exit, and any later one but a rank's clean stop on our SIGTERM
      // or our SIGKILL (its code is the stop, not a failure of its own)
      if (r.exit_code != 0 && !forwarded && !r.stopped_by_launcher && !r.stopped_on_signal &&
          (failures.empty() || r.exit_code != 128 + SIGTERM)) {
        r.failed = true;
        failures.push_back(&r);
        if (failures.size() == 1) {
          signal_all(SIGTERM);  // the others would wait for it in a collective until the timeout
          stop_deadline = std::chrono::steady_clock::now() + options.grace;
        }
      }
    }
    const bool any_running = std::any_of(ranks.begin(), ranks.end(), [](const Rank& r) { return r.running; });
    const bool any_output = std::any_of(ranks.begin(), ranks.end(), [](const Rank& r) { return r.output >= 0; });
    if (!any_running && !any_output) break;
    if (any_running && !killed && std::chrono::steady_clock::now() > stop_deadline) {
      for (auto& r : ranks) r.stopped_by_launcher = r.running;
      signal_all(SIGKILL);
      killed = true;
    }
  }
  std::signal(SIGINT, previous_int);
  std::signal(SIGTERM, previous_term);

  if (const Rank* r = blamed_rank(failures, ranks)) {
    std::string tail;
    for (const auto& line : r->tail) tail += "\n  | " + line;
    const std::string message = failure_message(*r, world);
    fmt::print(stderr, "libreyolo: error: {}{}\n", message, tail);
    if (options.on_failure) options.on_failure(message + tail, r->rank);  // status.json gets the lines too
    return r->exit_code != 0 ? r->exit_code : 1;
  }
  if (forwarded) {
    for (const auto& r : ranks) if (r.exit_code != 0) return r.exit_code;
    return 128 + forwarded;
  }
  if (first_stopped != nullptr) {
    fmt::print(stderr, "libreyolo: rank {} received {}: the ranks saved and stopped together\n", first_stopped->rank,
               signal_name(first_stopped->exit_code - 128));
    return first_stopped->exit_code;
  }
  for (const auto& r : ranks) if (r.exit_code != 0) return r.exit_code;
  return 0;
}

}  // namespace libreyolo::dist
