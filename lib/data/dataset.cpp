#include "data/dataset.h"

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/log.h"
#include "data/augment/geometry.h"
#include "data/image_io.h"

#include <fmt/format.h>
#include <opencv2/imgproc.hpp>

#include <atomic>
#include <cmath>
#include <cstring>
#include <fstream>

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

fs::path disk_cache_path(const fs::path& image, int image_size) {
  return fs::path(image.string() + fmt::format(".{}.libreyolo", image_size));
}

}  // namespace

namespace {
RamCachePeers ram_cache_peers;
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

DetectionDataset::DetectionDataset(std::vector<ImageRecord> records, int class_count, int image_size, CacheMode cache)
    : records_(std::move(records)), class_count_(class_count), image_size_(image_size), cache_(cache) {
  static std::atomic<std::uint64_t> next_id{1};
  id_ = next_id++;
  if (cache_ == CacheMode::ram) {
    const std::uint64_t needed = resized_bytes();
    const std::uint64_t copies = static_cast<std::uint64_t>(ram_cache_peers.copies);
    const std::uint64_t available = available_memory_bytes();
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
        log::warn("cache=ram: {:.2f} GB of resized images{}, {:.2f} GB together (one shared copy per machine is not built "
                  "yet; cache=disk shares the cached files)",
                  static_cast<double>(needed) / 1e9, each, static_cast<double>(needed * copies) / 1e9);
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

std::uint64_t DetectionDataset::resized_bytes() const {
  std::uint64_t total = 0;
  for (const auto& record : records_) {
    const double ratio = static_cast<double>(image_size_) / std::max(record.width, record.height);
    total += static_cast<std::uint64_t>(std::ceil(record.width * ratio)) *
             static_cast<std::uint64_t>(std::ceil(record.height * ratio)) * 3;
  }
  return total;
}

cv::Mat DetectionDataset::decode_resized(std::size_t index) const {
  cv::Mat image;
  try {
    image = decode_image(records_[index].image, image_size_);
  } catch (const CorruptImage& error) {
    throw DataError(fmt::format("{}: {}", records_[index].image.string(), error.what()));
  }
  const double ratio = static_cast<double>(image_size_) / std::max(image.cols, image.rows);
  if (ratio != 1.0) {
    const int width = std::min(static_cast<int>(std::ceil(image.cols * ratio)), image_size_);
    const int height = std::min(static_cast<int>(std::ceil(image.rows * ratio)), image_size_);
    cv::resize(image, image, cv::Size(width, height), 0, 0, cv::INTER_LINEAR);
  }
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
  const fs::path path = disk_cache_path(records_[index].image, image_size_);
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

Sample DetectionDataset::load_resized(std::size_t index) const {
  cv::Mat image;
  if (cache_ == CacheMode::ram) {
    std::call_once(ram_once_[index], [&] { ram_[index] = decode_resized(index); });
    image = ram_[index];  // shared, read-only: augmentations always write new images
  } else if (cache_ == CacheMode::disk) {
    image = load_disk_cached(index);
  } else {
    image = recently_decoded(index);
  }
  Sample sample;
  sample.image = image;
  const float width = static_cast<float>(image.cols);
  const float height = static_cast<float>(image.rows);
  for (const auto& box : records_[index].boxes) {
    sample.boxes.push_back({box.cls, (box.cx - box.w / 2) * width, (box.cy - box.h / 2) * height,
                            (box.cx + box.w / 2) * width, (box.cy + box.h / 2) * height});
  }
  return sample;
}

}  // namespace libreyolo::data
