#include "core/share_files.h"

#include "build_config.h"
#include "core/error.h"

#include <fmt/format.h>

#include <cstdlib>
#include <vector>

namespace libreyolo {

namespace fs = std::filesystem;

fs::path find_share_file(const std::string& relative_path) {
  std::vector<fs::path> folders;
  if (const char* share = std::getenv("LIBREYOLO_SHARE")) folders.emplace_back(share);
  std::error_code error;
  if (const auto self = fs::read_symlink("/proc/self/exe", error); !error) folders.push_back(self.parent_path() / ".." / "share" / "libreyolo");
  folders.emplace_back(LIBREYOLO_SHARE_DIR);
  folders.emplace_back(LIBREYOLO_SOURCE_SHARE_DIR);
  for (const auto& folder : folders) {
    if (fs::exists(folder / relative_path)) return folder / relative_path;
  }
  std::string searched;
  for (const auto& folder : folders) searched += (searched.empty() ? "" : ", ") + folder.string();
  throw RuntimeError(fmt::format("{} is missing from the installation (looked in {}); reinstall libreyolo or set LIBREYOLO_SHARE",
                                 relative_path, searched));
}

}  // namespace libreyolo
