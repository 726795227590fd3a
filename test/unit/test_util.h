// Small helpers shared by the unit tests.
#pragma once

#include <torch/nn/module.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

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

inline std::int64_t parameter_count(torch::nn::Module& module) {
  std::int64_t total = 0;
  for (const auto& parameter : module.parameters()) total += parameter.numel();
  return total;
}

}  // namespace test_util
