#include "data/dataset.h"

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/log.h"
#include "data/augment/geometry.h"
#include "data/image_io.h"

#include <fmt/format.h>
#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>

namespace libreyolo::data {

namespace fs = std::filesystem;

namespace {

constexpr char kDiskMagic[8] = {'L', 'R', 'Y', 'C', 'A', 'C', 'H', '1'};

std::uint64_t available_memory_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  std::uint64_t value = 0;
  std::string unit;
  while (meminfo >> key >> value >> unit) {
    if (key == "MemAvailable:") return value * 1024;
  }
  return 0;
}

fs::path disk_cache_path(const fs::path& image, int image_size, ResizeRule rule) {
  return fs::path(image.string() + fmt::format(".{}{}.libreyolo", image_size, rule == ResizeRule::truncate ? "t" : ""));
}

}  // namespace

namespace {
RamCachePeers ram_cache_peers;

double resize_ratio(int width, int height, int image_size) {
  return static_cast<double>(image_size) / std::max(std::max(width, height), 1);
}

// The size of an image of `width` x `height` once resized so that its long side is `image_size`
// (a side truncated to nothing keeps one pixel).
cv::Size resized_size(int width, int height, int image_size, ResizeRule rule) {
  const double ratio = resize_ratio(width, height, image_size);
  const auto side = [&](int length) {
    const double scaled = length * ratio;
    const int rounded = rule == ResizeRule::truncate ? static_cast<int>(scaled) : static_cast<int>(std::ceil(scaled));
    return std::clamp(rounded, 1, image_size);
  };
  return {side(width), side(height)};
}

}  // namespace

void set_ram_cache_peers(RamCachePeers peers) {
  peers.copies = std::max(1, peers.copies);
  ram_cache_peers = peers;
}

CacheMode parse_cache_mode(const std::string& text) {
  if (text == "ram") return CacheMode::ram;
  if (text == "disk") return CacheMode::disk;
  return CacheMode::none;
}

DetectionDataset::DetectionDataset(std::vector<ImageRecord> records, int class_count, int image_size, CacheMode cache,
                                   ResizeRule resize)
    : records_(std::move(records)), class_count_(class_count), image_size_(image_size), cache_(cache), resize_(resize) {
  static std::atomic<std::uint64_t> next_id{1};
  id_ = next_id++;
  if (cache_ == CacheMode::ram) {
    const std::uint64_t needed = resized_bytes();
    const std::uint64_t available = available_memory_bytes();
    if (ram_cache_peers.copies > 1 && !ram_cache_peers.shared_key.empty() && share_ram_cache(needed, available)) return;
    const std::uint64_t copies = static_cast<std::uint64_t>(ram_cache_peers.copies);
    const std::string each = copies > 1 ? fmt::format(" in each of the {} processes on this machine", copies) : "";
    // Ultralytics keeps a 50 % safety margin on top of the images themselves.
    if (available > 0 && needed * copies * 3 / 2 > available) {
      if (ram_cache_peers.reports) {
        log::warn("cache=ram needs {:.1f} GB for {} images{} but {:.1f} GB are available; not caching",
                  static_cast<double>(needed) * 1.5 / 1e9, records_.size(), each, static_cast<double>(available) / 1e9);
      }
      cache_ = CacheMode::none;
    } else {
      ram_.resize(records_.size());
      ram_once_ = std::make_unique<std::once_flag[]>(records_.size());
      if (copies > 1 && ram_cache_peers.reports) {
        log::warn("cache=ram: {:.2f} GB of resized images{}, {:.2f} GB together (no shared copy{}; cache=disk shares the "
                  "cached files)",
                  static_cast<double>(needed) / 1e9, each, static_cast<double>(needed * copies) / 1e9,
                  shared_failure_.empty() ? "" : ": " + shared_failure_);
      } else {
        log::info("cache=ram: {:.2f} GB of resized images (filled on first use)", static_cast<double>(needed) / 1e9);
      }
    }
  }
  if (cache_ == CacheMode::disk && !records_.empty() && (!fs::is_directory(records_.front().image.parent_path()) ||
                                                    folder_marked_read_only(records_.front().image.parent_path()))) {
    log::warn("cache=disk: {} is read-only; not caching", records_.front().image.parent_path().string());
    cache_ = CacheMode::none;
  }
}

// One copy for the machine's processes, in shared memory. False (with the reason kept for the
// per-process warning) when it cannot be had; the caller then gives each process its own.
bool DetectionDataset::share_ram_cache(std::uint64_t needed, std::uint64_t available) {
  std::vector<std::pair<int, int>> capacity;  // the resized size, and a pixel of slack for decoders that round
  capacity.reserve(records_.size());
  std::uint64_t bytes = 0;
  std::size_t fingerprint = std::hash<int>{}(image_size_) * 2 + (resize_ == ResizeRule::truncate ? 1 : 0);
  for (const auto& record : records_) {
    const cv::Size resized = resized_size(record.width, record.height, image_size_, resize_);
    const int rows = std::min(resized.height + 1, image_size_), cols = std::min(resized.width + 1, image_size_);
    capacity.emplace_back(rows, cols);
    bytes += static_cast<std::uint64_t>(rows) * static_cast<std::uint64_t>(cols) * 3;
    fingerprint = fingerprint * 31 + std::hash<std::string>{}(record.image.string());
  }
  // Named by the run, the images and their count in this process (the same train and val
  // datasets are built in the same order in every process).
  static std::mutex mutex;
  static std::map<std::size_t, int> built;
  int ordinal = 0;
  {
    const std::lock_guard lock(mutex);
    ordinal = built[fingerprint]++;
  }
  const SharedCacheOptions options{.name = fmt::format("/libreyolo-{}-{:016x}-{}", ram_cache_peers.shared_key, fingerprint, ordinal),
                                   .create = ram_cache_peers.reports,
                                   .processes = ram_cache_peers.copies};
  if (options.create) {
    const auto shm_free = SharedImageCache::free_bytes();
    if (available > 0 && needed * 3 / 2 > available) {
      shared_failure_ = fmt::format("{:.1f} GB available", static_cast<double>(available) / 1e9);
    } else if (shm_free && *shm_free < bytes) {
      shared_failure_ = fmt::format("/dev/shm has {:.2f} GB free for {:.2f} GB; a container's --shm-size sets it",
                                    static_cast<double>(*shm_free) / 1e9, static_cast<double>(bytes) / 1e9);
    }
    if (!shared_failure_.empty()) {
      SharedImageCache::decline(options);
      return false;
    }
  }
  shared_ = SharedImageCache::open(options, capacity, shared_failure_);
  if (!shared_) return false;
  if (ram_cache_peers.reports) {
    log::info("cache=ram: {:.2f} GB of resized images in shared memory, one copy for the {} processes on this machine "
              "(filled on first use)", static_cast<double>(shared_->bytes()) / 1e9, ram_cache_peers.copies);
  }
  return true;
}

std::uint64_t DetectionDataset::resized_bytes() const {
  std::uint64_t total = 0;
  for (const auto& record : records_) {
    total += static_cast<std::uint64_t>(resized_size(record.width, record.height, image_size_, resize_).area()) * 3;
  }
  return total;
}

cv::Mat DetectionDataset::decode_resized(std::size_t index) const {
  cv::Mat image;
  try {
    // LibreYOLO resizes the full decode; a decoder's own scaling would give other pixels
    image = decode_image(records_[index].image, resize_ == ResizeRule::truncate ? 0 : image_size_);
  } catch (const CorruptImage& error) {
    throw DataError(fmt::format("{}: {}", records_[index].image.string(), error.what()));
  }
  const cv::Size size = resized_size(image.cols, image.rows, image_size_, resize_);
  if (size != image.size()) cv::resize(image, image, size, 0, 0, cv::INTER_LINEAR);
  return image;
}

// The images this thread decoded last (its current batch and mosaic partners drawn from it):
// a batch decodes each image once however often the augmentations use it.
cv::Mat DetectionDataset::recently_decoded(std::size_t index) const {
  struct Entry {
    std::uint64_t dataset;
    std::size_t index;
    cv::Mat image;
  };
  constexpr std::size_t kCapacity = 64;
  thread_local std::vector<Entry> recent;
  for (auto it = recent.begin(); it != recent.end(); ++it) {
    if (it->dataset == id_ && it->index == index) return it->image;
  }
  cv::Mat image = decode_resized(index);
  if (recent.size() == kCapacity) recent.erase(recent.begin());
  recent.push_back({id_, index, image});
  return image;
}

cv::Mat DetectionDataset::load_disk_cached(std::size_t index) const {
  const fs::path path = disk_cache_path(records_[index].image, image_size_, resize_);
  std::ifstream stream(path, std::ios::binary);
  if (stream) {
    char magic[8];
    std::int32_t rows = 0, cols = 0;
    stream.read(magic, 8);
    stream.read(reinterpret_cast<char*>(&rows), 4);
    stream.read(reinterpret_cast<char*>(&cols), 4);
    if (stream && std::memcmp(magic, kDiskMagic, 8) == 0 && rows > 0 && cols > 0 && rows <= image_size_ &&
        cols <= image_size_) {
      cv::Mat image(rows, cols, CV_8UC3);
      stream.read(reinterpret_cast<char*>(image.data), static_cast<std::streamsize>(image.total() * 3));
      if (stream) return image;
    }
  }
  cv::Mat image = decode_resized(index);  // missing or unreadable cache file: rebuild it
  try {
    write_atomically(path, [&](const fs::path& temporary) {
      std::ofstream out(temporary, std::ios::binary);
      const std::int32_t rows = image.rows, cols = image.cols;
      out.write(kDiskMagic, 8);
      out.write(reinterpret_cast<const char*>(&rows), 4);
      out.write(reinterpret_cast<const char*>(&cols), 4);
      out.write(reinterpret_cast<const char*>(image.data), static_cast<std::streamsize>(image.total() * 3));
    });
  } catch (const std::exception& error) {
    log::warn("cache=disk: cannot write {}: {}", path.string(), error.what());
  }
  return image;
}

std::vector<int> DetectionDataset::image_classes(std::size_t index) const {
  std::vector<int> classes;
  for (const auto& box : records_[index].boxes) classes.push_back(box.cls);
  return classes;
}

Sample DetectionDataset::load_resized(std::size_t index) const {
  cv::Mat image;
  if (shared_) {
    image = shared_->get(index);  // read-only: augmentations always write new images
    if (image.empty()) {
      image = decode_resized(index);
      shared_->put(index, image);
    }
  } else if (cache_ == CacheMode::ram) {
    std::call_once(ram_once_[index], [&] { ram_[index] = decode_resized(index); });
    image = ram_[index];  // shared, read-only: augmentations always write new images
  } else if (cache_ == CacheMode::disk) {
    image = load_disk_cached(index);
  } else {
    image = recently_decoded(index);
  }
  const ImageRecord& record = records_[index];
  const double ratio = resize_ratio(record.width, record.height, image_size_);
  return with_boxes(index, image, resize_ == ResizeRule::truncate ? cv::Size2d(record.width * ratio, record.height * ratio)
                                                                 : cv::Size2d(image.cols, image.rows));
}

Sample DetectionDataset::load_original(std::size_t index) const {
  try {
    const cv::Mat image = decode_image(records_[index].image);
    return with_boxes(index, image, cv::Size2d(image.cols, image.rows));
  } catch (const CorruptImage& error) {
    throw DataError(fmt::format("{}: {}", records_[index].image.string(), error.what()));
  }
}

Sample DetectionDataset::with_boxes(std::size_t index, const cv::Mat& image, cv::Size2d scale) const {
  Sample sample;
  sample.image = image;
  const float width = static_cast<float>(scale.width);
  const float height = static_cast<float>(scale.height);
  for (const auto& box : records_[index].boxes) {
    sample.boxes.push_back({box.cls, (box.cx - box.w / 2) * width, (box.cy - box.h / 2) * height,
                            (box.cx + box.w / 2) * width, (box.cy + box.h / 2) * height});
  }
  return sample;
}

}  // namespace libreyolo::data
