#include "data/label_scan.h"

#include "core/atomic_file.h"
#include "core/log.h"
#include "core/parallel.h"
#include "data/image_io.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <fstream>
#include <sys/stat.h>

namespace libreyolo::data {

namespace fs = std::filesystem;

namespace {

constexpr int kMinimumSide = 10;

struct Outcome {
  bool kept = false;
  bool missing_label = false;
  int duplicates = 0;
  ImageRecord record;
  std::string message;
};

Outcome check_one(const fs::path& image, int class_count) {
  Outcome outcome;
  outcome.record.image = image;
  try {
    const ImageInfo info = read_image_info(image);
    if (info.width < kMinimumSide || info.height < kMinimumSide) {
      throw CorruptImage(fmt::format("image size {}x{} < {} pixels", info.width, info.height, kMinimumSide));
    }
    check_pixel_limit(info.width, info.height);
    outcome.record.width = info.width;
    outcome.record.height = info.height;
    if (info.truncated) {
      outcome.message = fmt::format("{}: corrupt JPEG (no end marker), decoded as far as it goes", image.string());
    }
  } catch (const CorruptImage& error) {
    outcome.message = fmt::format("ignoring corrupt image/label: {}: {}", image.string(), error.what());
    return outcome;
  }
  const fs::path label = label_path_for(image);
  if (!fs::exists(label)) {
    outcome.missing_label = true;
    outcome.kept = true;
    return outcome;
  }
  try {
    ParsedLabels parsed = read_label_file(label, class_count);
    outcome.record.boxes = std::move(parsed.boxes);
    outcome.duplicates = parsed.duplicates_removed;
    if (parsed.duplicates_removed > 0) {
      outcome.message = fmt::format("{}: {} duplicate labels removed", image.string(), parsed.duplicates_removed);
    }
  } catch (const CorruptLabel& error) {
    outcome.message = fmt::format("ignoring corrupt image/label: {}: {}", label.string(), error.what());
    return outcome;
  }
  outcome.kept = true;
  return outcome;
}

// FNV-1a: stable across runs and machines, unlike std::hash.
struct Fingerprint {
  std::uint64_t value = 1469598103934665603ull;
  void add(std::string_view text) {
    for (const unsigned char c : text) {
      value ^= c;
      value *= 1099511628211ull;
    }
    value ^= 0xff;
    value *= 1099511628211ull;
  }
  void add_file(const fs::path& path) {
    struct stat info {};
    add(path.string());
    if (::stat(path.c_str(), &info) != 0) {
      add("missing");
      return;
    }
    add(std::to_string(info.st_size));
    add(std::to_string(info.st_mtim.tv_sec) + "." + std::to_string(info.st_mtim.tv_nsec));
  }
};

std::string fingerprint_of(const std::vector<fs::path>& images, int class_count) {
  Fingerprint fingerprint;
  fingerprint.add(fmt::format("v{} nc{}", kLabelCacheVersion, class_count));
  for (const auto& image : images) {
    fingerprint.add_file(image);
    fingerprint.add_file(label_path_for(image));
  }
  return fmt::format("{:016x}", fingerprint.value);
}

nlohmann::json to_json(const ScanResult& result, const std::string& fingerprint) {
  nlohmann::json images = nlohmann::json::array();
  for (const auto& record : result.images) {
    nlohmann::json boxes = nlohmann::json::array();
    for (const auto& box : record.boxes) boxes.push_back({box.cls, box.cx, box.cy, box.w, box.h});
    images.push_back({{"image", record.image.string()}, {"width", record.width}, {"height", record.height}, {"boxes", boxes}});
  }
  return {{"version", kLabelCacheVersion}, {"fingerprint", fingerprint},     {"images", images},
          {"backgrounds", result.backgrounds}, {"missing_labels", result.missing_labels},
          {"corrupt", result.corrupt},   {"duplicates_removed", result.duplicates_removed},
          {"messages", result.messages}};
}

// Returns false (and the caller rescans) for a missing, unreadable, stale or foreign cache.
bool load_cache(const fs::path& path, const std::string& fingerprint, ScanResult& result) {
  std::ifstream stream(path);
  if (!stream) return false;
  try {
    const auto json = nlohmann::json::parse(stream);
    if (json.at("version").get<int>() != kLabelCacheVersion || json.at("fingerprint").get<std::string>() != fingerprint) {
      return false;
    }
    for (const auto& item : json.at("images")) {
      ImageRecord record;
      record.image = item.at("image").get<std::string>();
      record.width = item.at("width").get<int>();
      record.height = item.at("height").get<int>();
      for (const auto& box : item.at("boxes")) {
        record.boxes.push_back(Box{box.at(0).get<int>(), box.at(1).get<float>(), box.at(2).get<float>(),
                                   box.at(3).get<float>(), box.at(4).get<float>()});
      }
      result.images.push_back(std::move(record));
    }
    result.backgrounds = json.at("backgrounds").get<int>();
    result.missing_labels = json.at("missing_labels").get<int>();
    result.corrupt = json.at("corrupt").get<int>();
    result.duplicates_removed = json.at("duplicates_removed").get<int>();
    result.messages = json.at("messages").get<std::vector<std::string>>();
  } catch (const std::exception&) {
    log::warn("label cache {} is unreadable; rebuilding it", path.string());
    const fs::path cache_file = path;
    result = ScanResult{};
    result.cache_file = cache_file;
    return false;
  }
  return true;
}

}  // namespace

std::string ScanResult::summary() const {
  // Ultralytics' counting, which users compare against: "images" are those with a label file
  // (coco128: "126 images, 2 backgrounds, 0 corrupt"); backgrounds are missing or empty labels.
  return fmt::format("{} images, {} backgrounds, {} corrupt", images.size() - missing_labels, backgrounds, corrupt);
}

fs::path label_cache_path(const std::vector<fs::path>& images) {
  if (images.empty()) return {};
  const fs::path labels_dir = label_path_for(images.front()).parent_path();
  return fs::path(labels_dir.string() + ".libreyolo.cache");
}

ScanResult scan_images(const std::vector<fs::path>& images, int class_count, const ScanOptions& options) {
  ScanResult result;
  const std::string fingerprint = fingerprint_of(images, class_count);
  result.cache_file = label_cache_path(images);
  if (options.use_cache && !result.cache_file.empty() && load_cache(result.cache_file, fingerprint, result)) {
    result.from_cache = true;
    return result;
  }

  std::vector<Outcome> outcomes(images.size());
  parallel_for(images.size(), options.threads, [&](std::size_t i) { outcomes[i] = check_one(images[i], class_count); });
  for (auto& outcome : outcomes) {
    if (!outcome.message.empty()) result.messages.push_back(outcome.message);
    if (!outcome.kept) {
      ++result.corrupt;
      continue;
    }
    result.missing_labels += outcome.missing_label ? 1 : 0;
    result.backgrounds += outcome.record.boxes.empty() ? 1 : 0;
    result.duplicates_removed += outcome.duplicates;
    result.images.push_back(std::move(outcome.record));
  }

  if (options.use_cache && !result.cache_file.empty() && !folder_marked_read_only(result.cache_file.parent_path())) {
    std::string text;
    try {  // a file name that is not UTF-8 cannot go into JSON: no cache then, said as such
      text = to_json(result, fingerprint).dump();
    } catch (const nlohmann::json::exception& error) {
      log::warn("label cache {} not written ({}); the scan will run again next time", result.cache_file.string(), error.what());
    }
    if (!text.empty()) {
      try {
        write_file_atomically(result.cache_file, text);
      } catch (const std::exception& error) {
        log::warn("label cache folder {} is not writeable ({}); the scan will run again next time",
                  result.cache_file.parent_path().string(), error.what());
      }
    }
  }
  return result;
}

}  // namespace libreyolo::data
