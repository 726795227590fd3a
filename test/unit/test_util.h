// Small helpers shared by the unit tests.
#pragma once

#include <torch/nn/module.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <unistd.h>

namespace test_util {

inline std::string read_all(const std::filesystem::path& path) {
  std::ifstream stream(path, std::ios::binary);
  std::stringstream buffer;
  buffer << stream.rdbuf();
  return buffer.str();
}

inline void write_all(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// A folder of its own under the system's temporary folder, removed with everything in it.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& prefix) {
    static int made = 0;
    path = std::filesystem::temp_directory_path() /
           ("libreyolo_" + prefix + "_" + std::to_string(::getpid()) + "_" + std::to_string(made++));
    std::filesystem::create_directories(path);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
};

inline std::int64_t parameter_count(torch::nn::Module& module) {
  std::int64_t total = 0;
  for (const auto& parameter : module.parameters()) total += parameter.numel();
  return total;
}

}  // namespace test_util
