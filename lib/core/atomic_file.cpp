#include "core/atomic_file.h"

#include "core/error.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

namespace libreyolo {

namespace {

std::filesystem::path temporary_for(const std::filesystem::path& path) {
  static std::atomic<unsigned> counter{0};
  return path.parent_path() /
         fmt::format(".{}.tmp.{}.{}", path.filename().string(), static_cast<long>(::getpid()), counter++);
}

void sync_path(const std::filesystem::path& path, int flags) {
  const int fd = ::open(path.c_str(), flags);
  if (fd < 0) return;  // best effort: some filesystems refuse O_DIRECTORY opens
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

void write_atomically(const std::filesystem::path& path,
                      const std::function<void(const std::filesystem::path& temporary)>& write) {
  const auto folder = path.parent_path().empty() ? std::filesystem::path(".") : path.parent_path();
  std::error_code error;
  std::filesystem::create_directories(folder, error);
  if (error) throw RuntimeError(fmt::format("cannot create folder {}: {}", folder.string(), error.message()));

  const auto temporary = temporary_for(folder / path.filename());
  try {
    write(temporary);
  } catch (...) {
    std::filesystem::remove(temporary, error);
    throw;
  }
  if (!std::filesystem::exists(temporary)) {
    throw RuntimeError(fmt::format("writing {} produced no file", path.string()));
  }
  sync_path(temporary, O_RDONLY);
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    const int saved = errno;
    std::filesystem::remove(temporary, error);
    throw RuntimeError(fmt::format("cannot move {} into place: {}", path.string(), std::strerror(saved)));
  }
  sync_path(folder, O_RDONLY | O_DIRECTORY);
}

void write_file_atomically(const std::filesystem::path& path, std::string_view content) {
  write_atomically(path, [&](const std::filesystem::path& temporary) {
    std::ofstream stream(temporary, std::ios::binary | std::ios::trunc);
    if (!stream) throw RuntimeError(fmt::format("cannot write {}: {}", path.string(), std::strerror(errno)));
    stream.write(content.data(), static_cast<std::streamsize>(content.size()));
    stream.flush();
    if (!stream) throw RuntimeError(fmt::format("cannot write {}: {}", path.string(), std::strerror(errno)));
  });
}

int remove_stale_temporaries(const std::filesystem::path& folder) {
  std::error_code error;
  int removed = 0;
  for (const auto& entry : std::filesystem::directory_iterator(folder, error)) {
    const std::string name = entry.path().filename().string();
    const auto marker = name.rfind(".tmp.");
    if (name.empty() || name.front() != '.' || marker == std::string::npos) continue;
    const std::string rest = name.substr(marker + 5);  // <pid>.<n>
    const auto dot = rest.find('.');
    if (dot == std::string::npos) continue;
    char* end = nullptr;
    const long pid = std::strtol(rest.substr(0, dot).c_str(), &end, 10);
    if (pid <= 0 || *end != '\0') continue;
    const bool alive = ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
    if (!alive && std::filesystem::remove(entry.path(), error)) ++removed;
  }
  return removed;
}

bool folder_marked_read_only(const std::filesystem::path& folder) {
  struct stat info {};
  return ::stat(folder.c_str(), &info) == 0 && S_ISDIR(info.st_mode) && (info.st_mode & 0222) == 0;
}

}  // namespace libreyolo
