#include "data/box_crops.h"

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/log.h"
#include "core/parallel.h"
#include "data/image_io.h"
#include "data/training_data.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <system_error>

namespace libreyolo::data {

namespace fs = std::filesystem;

namespace {

// A class name as a folder name: path separators and a leading dot replaced.
std::string folder_name(std::string name) {
  std::replace(name.begin(), name.end(), '/', '_');
  std::replace(name.begin(), name.end(), '\\', '_');
  if (name.empty() || name.front() == '.') name = "_" + name;
  return name;
}

}  // namespace

bool crop_goes_to_val(const std::string& name, double fraction) {
  std::uint64_t hash = 1469598103934665603ull;
  for (const unsigned char c : name) hash = (hash ^ c) * 1099511628211ull;
  return static_cast<double>(hash % 1000000) / 1e6 < fraction;
}

BoxCropResult write_box_crops(const DatasetSpec& spec, const BoxCropOptions& options) {
  std::error_code error;
  if (options.out.empty()) throw UsageError("out= is required: the folder the classification dataset is written to");
  if (fs::exists(options.out, error) && !fs::is_empty(options.out, error)) {
    throw DataError(fmt::format("out={}: exists and is not empty; give a new folder", options.out.string()));
  }
  // every labelled image of every split once (coco128's train and val are the same images)
  std::vector<ImageRecord> records;
  std::set<fs::path> seen;
  for (const std::string split : {"train", "val", "test"}) {
    if (spec.split(split).empty()) continue;
    for (auto& record : read_split(spec, split, options.workers).images) {
      if (seen.insert(fs::weakly_canonical(record.image, error)).second) records.push_back(std::move(record));
    }
  }
  std::sort(records.begin(), records.end(), [](const ImageRecord& a, const ImageRecord& b) { return a.image < b.image; });
  std::size_t boxes = 0;
  for (const auto& record : records) boxes += record.boxes.size();
  if (boxes == 0) throw DataError(fmt::format("{}: no labelled box to crop", spec.yaml_file.string()));

  std::vector<std::string> folders;
  for (const auto& name : spec.names) folders.push_back(folder_name(name));
  // crops per (split, class), and the files, to drop a class afterwards
  std::vector<std::vector<std::array<std::size_t, 2>>> counts(records.size());
  std::vector<std::size_t> small(records.size(), 0);
  std::vector<std::string> unreadable(records.size());
  parallel_for(records.size(), std::max(1, options.workers), [&](std::size_t i) {
    const ImageRecord& record = records[i];
    // its path under the root names its crops ("images_train_000001_0.jpg") and picks its split
    std::string name = record.image.lexically_relative(spec.root).replace_extension().generic_string();
    if (name.empty() || name.starts_with("..")) name = record.image.stem().string();
    const bool val = crop_goes_to_val(name, options.val_fraction);
    std::replace(name.begin(), name.end(), '/', '_');
    cv::Mat image;
    try {
      image = decode_image(record.image);
    } catch (const CorruptImage& e) {
      unreadable[i] = fmt::format("{}: {}", record.image.string(), e.what());
      return;
    }
    counts[i].assign(spec.names.size(), {0, 0});
    for (std::size_t k = 0; k < record.boxes.size(); ++k) {
      const auto& box = record.boxes[k];
      const double w = box.w * image.cols, h = box.h * image.rows;
      const double cx = box.cx * image.cols, cy = box.cy * image.rows;
      const int x1 = std::max(0, static_cast<int>(std::floor(cx - w / 2 - options.margin * w)));
      const int y1 = std::max(0, static_cast<int>(std::floor(cy - h / 2 - options.margin * h)));
      const int x2 = std::min(image.cols, static_cast<int>(std::ceil(cx + w / 2 + options.margin * w)));
      const int y2 = std::min(image.rows, static_cast<int>(std::ceil(cy + h / 2 + options.margin * h)));
      if (std::min(x2 - x1, y2 - y1) < options.min_size) {
        ++small[i];
        continue;
      }
      const fs::path folder = options.out / (val ? "val" : "train") / folders[static_cast<std::size_t>(box.cls)];
      fs::create_directories(folder);
      const auto encoded = encode_image(image(cv::Rect(x1, y1, x2 - x1, y2 - y1)), ".jpg", 95);
      write_file_atomically(folder / fmt::format("{}_{}.jpg", name, k),
                            std::string_view(reinterpret_cast<const char*>(encoded.data()), encoded.size()));
      ++counts[i][static_cast<std::size_t>(box.cls)][val ? 1 : 0];
    }
  });
  BoxCropResult result;
  std::vector<std::array<std::size_t, 2>> per_class(spec.names.size(), {0, 0});
  for (std::size_t i = 0; i < records.size(); ++i) {
    if (!unreadable[i].empty()) {
      log::warn("skipped {}", unreadable[i]);
      continue;
    }
    ++result.images;
    result.too_small += small[i];
    for (std::size_t c = 0; c < per_class.size(); ++c) {
      per_class[c][0] += counts[i][c][0];
      per_class[c][1] += counts[i][c][1];
    }
  }
  for (std::size_t c = 0; c < per_class.size(); ++c) {
    if (per_class[c][0] == 0 && per_class[c][1] == 0) continue;  // never labelled (or every box too small)
    if (per_class[c][0] == 0 || per_class[c][1] == 0) {
      result.dropped.push_back(spec.names[c]);
      for (const char* split : {"train", "val"}) fs::remove_all(options.out / split / folders[c], error);
      continue;
    }
    result.classes.push_back(spec.names[c]);
    result.train += per_class[c][0];
    result.val += per_class[c][1];
  }
  if (result.classes.empty()) {
    throw DataError(fmt::format("{}: no class has crops in both train and val (min_size={}, val_fraction={}); lower "
                                "crop_min_size or use a larger dataset", spec.yaml_file.string(), options.min_size,
                                options.val_fraction));
  }
  return result;
}

}  // namespace libreyolo::data
