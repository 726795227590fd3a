// cache=ram shared by the data-parallel processes of one machine: one copy of the resized images
// in POSIX shared memory instead of one per process. The process that creates the segment
// reserves all of it up front (posix_fallocate, so that a full /dev/shm is an error here and not
// a SIGBUS later); the others attach to it. Slots are filled on first use by whichever process
// needs the image first (a per-slot state word, claimed with compare-and-swap); a slot being
// filled by another process is decoded privately instead of waited for. Once every process has
// attached, the name is removed, so the memory goes away with the last process however it ends.
#pragma once

#include <opencv2/core/mat.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace libreyolo::data {

struct SharedCacheOptions {
  std::string name;  // POSIX shared-memory name, "/..." (the same in every process of the machine)
  bool create = false;  // this process makes the segment; the others attach
  int processes = 1;    // how many attach in all (the creator included)
  std::chrono::milliseconds attach_timeout{std::chrono::minutes(10)};
};

class SharedImageCache {
 public:
  // `capacity`: each slot's largest image as (rows, cols), 3 channels of 8 bits. Null with the
  // reason in `why_not` when the segment cannot be made or joined (no room in /dev/shm, the
  // creator failed or never came, a layout that differs from the creator's).
  static std::unique_ptr<SharedImageCache> open(const SharedCacheOptions& options,
                                                const std::vector<std::pair<int, int>>& capacity, std::string& why_not);
  // For the creating process that will not share (not enough memory): the others learn it at once
  // and keep their own copies instead of waiting.
  static void decline(const SharedCacheOptions& options);
  ~SharedImageCache();
  SharedImageCache(const SharedImageCache&) = delete;
  SharedImageCache& operator=(const SharedImageCache&) = delete;

  // The cached image (a view of the shared memory, read-only by contract), or empty when the slot
  // is not filled yet.
  cv::Mat get(std::size_t index) const;
  // Stores `image` unless another process holds the slot or it does not fit. Thread- and process-safe.
  void put(std::size_t index, const cv::Mat& image);
  std::uint64_t bytes() const { return size_; }

  // Free bytes in the file system that backs POSIX shared memory (/dev/shm); nullopt if unknown.
  static std::optional<std::uint64_t> free_bytes();

 private:
  SharedImageCache() = default;
  struct Slot;
  std::string name_;
  bool creator_ = false;
  void* base_ = nullptr;
  std::uint64_t size_ = 0;
  Slot* slots_ = nullptr;
  unsigned char* data_ = nullptr;
  std::size_t count_ = 0;
};

}  // namespace libreyolo::data
