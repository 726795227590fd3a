// Single-thread cost of each stage of the YOLOv9 training pipeline (JSON on stdout), to see
// how the loader's images/s compares with the sum of its parts.
//   bench/data_stages <data.yaml> [imgsz=640] [samples=64]
#include "data/augment/color.h"
#include "data/augment/geometry.h"
#include "data/augment/mosaic_mixup.h"
#include "data/dataset.h"
#include "data/dataset_yaml.h"
#include "data/label_scan.h"
#include "data/loader.h"

#include <fmt/core.h>
#include <nlohmann/json.hpp>
#include <opencv2/core.hpp>

#include <chrono>
#include <cstdlib>

using namespace libreyolo::data;
using Clock = std::chrono::steady_clock;

namespace {
double ms_since(Clock::time_point start) { return std::chrono::duration<double, std::milli>(Clock::now() - start).count(); }
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    fmt::print(stderr, "usage: data_stages <data.yaml|coco128> [imgsz] [samples]\n");
    return 2;
  }
  cv::setNumThreads(1);  // what a loader worker sees
  keep_image_buffers_in_heap();
  const int size = argc > 2 ? std::atoi(argv[2]) : 640;
  const int samples = argc > 3 ? std::atoi(argv[3]) : 64;
  const auto spec = load_dataset_spec(argv[1]);
  const auto scan = scan_images(list_images(spec.train, "train"), spec.class_count(), {.threads = 2});
  DetectionDataset plain(scan.images, spec.class_count(), size, CacheMode::none);
  DetectionDataset cached(scan.images, spec.class_count(), size, CacheMode::ram);
  for (std::size_t i = 0; i < cached.size(); ++i) cached.load_resized(i);

  nlohmann::json stages;
  const auto n = static_cast<std::size_t>(samples);
  auto start = Clock::now();
  for (std::size_t i = 0; i < n; ++i) plain.load_resized((i * 7919) % plain.size());  // distinct images, no memo hits
  stages["decode_resize"] = ms_since(start) / samples;

  std::vector<PiecedImage> mosaics;
  start = Clock::now();
  for (std::size_t i = 0; i < n; ++i) {
    SampleRandom random(1, 0, i);
    std::array<Sample, 4> tiles;
    for (auto& tile : tiles) tile = cached.load_resized(static_cast<std::size_t>(random.integer(0, static_cast<int>(cached.size()) - 1)));
    mosaics.push_back(mosaic4_pieces(tiles, {size, size}, size, size));
  }
  stages["mosaic_layout"] = ms_since(start) / samples;

  start = Clock::now();
  for (const auto& mosaic : mosaics) mosaic.paint();
  stages["mosaic_paint_canvas"] = ms_since(start) / samples;

  std::vector<Sample> outputs;
  start = Clock::now();
  for (std::size_t i = 0; i < n; ++i) {
    SampleRandom random(2, 0, i);
    outputs.push_back(random_perspective(mosaics[i], {0, 0.1, 0.5, 1.5, 0, 0}, {size, size}, random));
  }
  stages["perspective_axis_aligned_from_pieces"] = ms_since(start) / samples;

  start = Clock::now();
  for (std::size_t i = 0; i < n; ++i) {
    SampleRandom random(2, 0, i);
    random_perspective(mosaics[i], {5, 0.1, 0.5, 1.5, 2, 0}, {size, size}, random);
  }
  stages["perspective_rotated_warp_with_paint"] = ms_since(start) / samples;

  start = Clock::now();
  for (std::size_t i = 0; i < n; ++i) {
    SampleRandom random(3, 0, i);
    hsv_multiplicative(outputs[i].image, 0.015, 0.7, 0.4, random);
  }
  stages["hsv_multiplicative"] = ms_since(start) / samples;

  start = Clock::now();
  for (auto& output : outputs) output = flip_horizontal(output);
  stages["flip_horizontal"] = ms_since(start) / samples;

  start = Clock::now();
  for (std::size_t b = 0; b + 16 <= outputs.size(); b += 16) {
    std::vector<Sample> batch(outputs.begin() + static_cast<long>(b), outputs.begin() + static_cast<long>(b + 16));
    collate(batch, std::vector<std::size_t>(16), false);
  }
  stages["collate"] = ms_since(start) / static_cast<double>(n - n % 16);

  fmt::print("{}\n", nlohmann::json{{"bench", "data_stages"}, {"imgsz", size}, {"samples", samples},
                                    {"ms_per_sample", stages}}.dump());
  return 0;
}
