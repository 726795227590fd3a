// Run folders: project/name, or name2, name3, ... when taken (unless exist_ok), as LibreYOLO,
// Ultralytics and YOLOv5 do. Creation is race-free: a name counts as ours only if we made it.
#pragma once

#include <filesystem>
#include <string_view>

namespace libreyolo {

std::filesystem::path create_run_dir(const std::filesystem::path& project, std::string_view name, bool exist_ok);

// An exclusive lock on a run folder (flock on <run>/.lock) while the object lives: a second
// process that trains in the same folder (two resume=true of one run) is refused with a
// UsageError naming the holder. The kernel drops the lock when a process dies, even by kill -9.
class RunLock {
 public:
  explicit RunLock(const std::filesystem::path& run_dir);
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace libreyolo
