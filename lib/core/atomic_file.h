// Every result file goes through here: write to a temporary file in the same folder, flush it
// to disk, then rename over the target, so a crash or Ctrl-C never leaves a half-written file.
#pragma once

#include <filesystem>
#include <functional>
#include <string_view>

namespace libreyolo {

// Calls `write(temporary_path)`, then fsyncs and renames the temporary over `path`. If `write`
// throws, the temporary is removed, `path` is untouched and the exception propagates.
void write_atomically(const std::filesystem::path& path,
                      const std::function<void(const std::filesystem::path& temporary)>& write);

void write_file_atomically(const std::filesystem::path& path, std::string_view content);

// Removes the temporaries write_atomically leaves in `folder` when a process is killed with -9
// (".<name>.tmp.<pid>.<n>" of a pid that no longer runs). Returns how many.
int remove_stale_temporaries(const std::filesystem::path& folder);

// True for an existing folder without any write bit: a read-only dataset, which caches leave
// untouched even when the process is root (who could write anyway).
bool folder_marked_read_only(const std::filesystem::path& folder);

}  // namespace libreyolo
