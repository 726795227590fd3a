// Run folders: project/name, or name2, name3, ... when taken (unless exist_ok), as LibreYOLO,
// Ultralytics and YOLOv5 do. Creation is race-free: a name counts as ours only if we made it.
#pragma once

#include <filesystem>
#include <string_view>

namespace libreyolo {

std::filesystem::path create_run_dir(const std::filesystem::path& project, std::string_view name, bool exist_ok);

}  // namespace libreyolo
