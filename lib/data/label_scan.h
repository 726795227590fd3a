// Scans a split: checks every image and its label file, keeps the valid ones (backgrounds
// included), skips corrupt ones with their reason, and caches the result beside the labels
// folder, keyed by paths, sizes, modification times, class count and a version.
#pragma once

#include "data/labels.h"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace libreyolo::data {

// A COCO JSON annotation as COCOeval reads it: the box as written (top-left corner and size in
// original pixels), the annotation's area, and whether it is a crowd region.
struct AnnotatedBox {
  int cls = 0;
  float x = 0, y = 0, w = 0, h = 0;
  float area = 0;
  bool crowd = false;
};

struct ImageRecord {
  std::filesystem::path image;
  int width = 0;  // upright size in pixels
  int height = 0;
  std::vector<Box> boxes;  // what training learns (COCO JSON: crowds and empty boxes left out, clipped)
  // COCO JSON only: the image's id and every annotation of it, the ground truth validation
  // measures against (as COCOeval does with the JSON); empty for YOLO labels, whose boxes are it.
  std::int64_t source_id = -1;
  std::vector<AnnotatedBox> annotations;
};

// What pycocotools counts in a COCO JSON (len of getImgIds, getAnnIds, getCatIds), and the crowd
// regions among the annotations.
struct CocoCounts {
  std::int64_t images = 0, annotations = 0, crowd = 0, categories = 0;
};

struct ScanResult {
  std::vector<ImageRecord> images;  // the kept images, in input order
  int backgrounds = 0;              // kept images with no boxes (missing or empty label file)
  int missing_labels = 0;
  int corrupt = 0;
  int duplicates_removed = 0;
  std::vector<std::string> messages;  // one line per skipped image or warning
  bool from_cache = false;
  std::filesystem::path cache_file;  // COCO JSON: the annotation file read
  std::optional<CocoCounts> coco;    // a COCO JSON split

  // "N images, M backgrounds, K corrupt" as Ultralytics counts: N images with a label file,
  // M kept images without boxes (missing or empty label file), K skipped.
  std::string summary() const;
};

struct ScanOptions {
  int threads = 2;
  bool use_cache = true;
};

inline constexpr int kLabelCacheVersion = 3;  // 2: the pixel limit; 3: zero-size boxes kept

ScanResult scan_images(const std::vector<std::filesystem::path>& images, int class_count,
                       const ScanOptions& options = {});

// Where the cache of a split lives: beside its labels folder, e.g. labels/train2017.libreyolo.cache.
std::filesystem::path label_cache_path(const std::vector<std::filesystem::path>& images);

}  // namespace libreyolo::data
