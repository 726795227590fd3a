// A detection dataset in memory: the scanned records plus the one expensive step every
// pipeline starts with, "decode and resize so the long side is imgsz", optionally cached in
// RAM or on disk (cache=ram|disk).
#pragma once

#include "data/label_scan.h"
#include "data/sample.h"
#include "data/shared_cache.h"

#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace libreyolo::data {

enum class CacheMode { none, ram, disk };
CacheMode parse_cache_mode(const std::string& text);  // "false" | "ram" | "disk"

// How "long side = imgsz" is done. round_up: Ultralytics' load_image (sides ceil(w * r); a JPEG may
// be decoded at 1/2, 1/4 or 1/8 scale first when that still covers imgsz, which is much faster).
// truncate: LibreYOLO's YOLOX-style datasets (load_resized_img: the full decode, then sides
// int(w * r), bilinear; boxes scaled by r, as its labels), whose pixels its YOLOX, YOLOv7 and
// RTMDet train and validate on.
enum class ResizeRule { round_up, truncate };

// cache=ram in the processes of a data-parallel run on one machine (`copies` of them). With a
// `shared_key` they hold one copy in POSIX shared memory, made by the process that `reports` (the
// machine's local rank 0) and joined by the others; when /dev/shm has no room, each falls back to
// a copy of its own, the memory check counts them all, and the reporting process warns once with
// the per-process cost. Process-wide; one process with a copy of its own by default.
struct RamCachePeers {
  int copies = 1;
  bool reports = true;
  std::string shared_key;  // the same in every process of the run (rank 0's nonce and the machine)
};
void set_ram_cache_peers(RamCachePeers peers);

// What every task's dataset tells the trainer: its images, classes and training size, and the
// classes each image holds (class_balanced sampling's repeat factors). A task's own reads
// (detection's boxes, classification's labels) are its subclass's.
class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual std::size_t size() const = 0;
  virtual int class_count() const = 0;
  virtual int image_size() const = 0;
  virtual CacheMode cache_mode() const = 0;
  // How validation of this task's images resizes them (detection: the family's rule).
  virtual ResizeRule resize_rule() const { return ResizeRule::round_up; }
  // The classes image `index` holds (detection: one entry per box; classification: its label).
  virtual std::vector<int> image_classes(std::size_t index) const = 0;
};

class DetectionDataset final : public Dataset {
 public:
  DetectionDataset(std::vector<ImageRecord> records, int class_count, int image_size, CacheMode cache,
                   ResizeRule resize = ResizeRule::round_up);

  std::size_t size() const override { return records_.size(); }
  int class_count() const override { return class_count_; }
  int image_size() const override { return image_size_; }
  const ImageRecord& record(std::size_t index) const { return records_[index]; }
  CacheMode cache_mode() const override { return cache_; }
  ResizeRule resize_rule() const override { return resize_; }
  std::vector<int> image_classes(std::size_t index) const override;

  // Long side = image_size by the dataset's ResizeRule, boxes in pixels of the resized image.
  // Thread-safe.
  Sample load_resized(std::size_t index) const;
  // The image at its own size, decoded now (never cached), boxes in its pixels. Thread-safe.
  Sample load_original(std::size_t index) const;

  // Bytes the resized images of the whole dataset take (for the cache=ram memory check).
  std::uint64_t resized_bytes() const;

 private:
  cv::Mat decode_resized(std::size_t index) const;
  // `scale`: what the record's normalised boxes are multiplied by ((width, height) of the image
  // they belong to, or of the original times r under ResizeRule::truncate).
  Sample with_boxes(std::size_t index, const cv::Mat& image, cv::Size2d scale) const;
  cv::Mat load_disk_cached(std::size_t index) const;
  cv::Mat recently_decoded(std::size_t index) const;
  bool share_ram_cache(std::uint64_t needed, std::uint64_t available);

  std::vector<ImageRecord> records_;
  int class_count_;
  int image_size_;
  CacheMode cache_;
  ResizeRule resize_;
  std::uint64_t id_ = 0;  // tells datasets apart in the per-thread decode memo
  std::unique_ptr<SharedImageCache> shared_;  // cache=ram shared with the machine's other processes
  std::string shared_failure_;                 // why there is none (for the warning)
  mutable std::vector<cv::Mat> ram_;
  mutable std::unique_ptr<std::once_flag[]> ram_once_;
};

}  // namespace libreyolo::data
