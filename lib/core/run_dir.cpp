#include "core/run_dir.h"

#include "core/error.h"

#include <fmt/format.h>

namespace libreyolo {

std::filesystem::path create_run_dir(const std::filesystem::path& project, std::string_view name, bool exist_ok) {
  if (name.empty() || name.find('/') != std::string_view::npos) {
    throw UsageError(fmt::format("name='{}' is not valid: give a plain folder name such as exp", name));
  }
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

}  // namespace libreyolo
