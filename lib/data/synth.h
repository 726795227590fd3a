// A deterministic synthetic detection dataset: simple shapes with exact boxes on textured
// backgrounds, written as a normal YOLO dataset (images/, labels/, data.yaml). The offline
// default for the README's main job and for tests: same seed, same bytes.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace libreyolo::data {

struct SynthOptions {
  std::filesystem::path out;
  int train_images = 240;
  int val_images = 60;
  int image_size = 320;
  std::uint64_t seed = 0;
};

struct SynthResult {
  std::filesystem::path yaml;
  int images = 0;
  int boxes = 0;
};

const std::vector<std::string>& synth_class_names();

SynthResult write_synthetic_dataset(const SynthOptions& options);

}  // namespace libreyolo::data
