#include "core/run_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

#include <fmt/format.h>

namespace libreyolo {

std::filesystem::path create_run_dir(const std::filesystem::path& project, std::string_view name, bool exist_ok) {
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string_view::npos) {
    throw UsageError(fmt::format("name='{}' is not valid: give a plain folder name such as exp", name));
  }
  if (project.empty()) throw UsageError("project='' is not valid: give a folder such as runs/train (the default)");
  std::error_code error;
  std::filesystem::create_directories(project, error);
  if (error) throw RuntimeError(fmt::format("cannot create project folder {}: {}", project.string(), error.message()));

  if (exist_ok) {
    const auto path = project / std::string(name);
    std::filesystem::create_directories(path, error);
    if (error) throw RuntimeError(fmt::format("cannot create run folder {}: {}", path.string(), error.message()));
    return path;
  }
  for (int suffix = 1; suffix < 10000; ++suffix) {
    const auto path = project / (suffix == 1 ? std::string(name) : fmt::format("{}{}", name, suffix));
    // create_directory is atomic: false means it already existed (another run has it).
    if (std::filesystem::create_directory(path, error)) return path;
    if (error) throw RuntimeError(fmt::format("cannot create run folder {}: {}", path.string(), error.message()));
  }
  throw RuntimeError(fmt::format("no free run folder name under {}/{}N", project.string(), name));
}

RunLock::RunLock(const std::filesystem::path& run_dir) {
  const auto path = run_dir / ".lock";
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw RuntimeError(fmt::format("cannot open {}: {}", path.string(), std::strerror(errno)));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    char holder[32] = {};
    const ssize_t n = ::pread(fd_, holder, sizeof holder - 1, 0);
    ::close(fd_);
    fd_ = -1;
    throw UsageError(fmt::format("another libreyolo process{} is training in {}; wait for it to end, or stop it first",
                                 n > 0 ? fmt::format(" (pid {})", std::string(holder, static_cast<std::size_t>(n))) : "",
                                 run_dir.string()));
  }
  const std::string pid = std::to_string(::getpid());
  if (::ftruncate(fd_, 0) == 0) (void)!::pwrite(fd_, pid.data(), pid.size(), 0);
}

RunLock::~RunLock() {
  if (fd_ >= 0) ::close(fd_);  // closing drops the lock
}

}  // namespace libreyolo
