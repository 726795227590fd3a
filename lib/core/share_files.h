// Files installed under share/libreyolo (dataset YAMLs, the timeline template): found in
// $LIBREYOLO_SHARE, next to the binary (<prefix>/bin/../share/libreyolo), the install prefix,
// then the source tree of this build.
#pragma once

#include <filesystem>
#include <string>

namespace libreyolo {

// Throws RuntimeError naming the folders searched when the file is nowhere.
std::filesystem::path find_share_file(const std::string& relative_path);

}  // namespace libreyolo
