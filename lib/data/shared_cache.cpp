#include "data/shared_cache.h"

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>

namespace libreyolo::data {

namespace {

constexpr std::uint64_t kMagic = 0x3130434d48535946ULL;  // "FYSHMC01"
constexpr std::uint64_t kAlign = 64;

enum Status : std::uint32_t { creating = 0, ready = 1, failed = 2 };
enum SlotState : std::uint32_t { empty = 0, filling = 1, filled = 2, unusable = 3 };

struct Header {
  std::uint64_t magic;
  std::uint32_t status;    // Status
  std::uint32_t attached;  // processes that have joined (the creator included)
  std::uint64_t slots;
  std::uint64_t total;
  std::uint64_t layout;  // hash of the slot capacities: every process must agree
};

std::uint64_t align(std::uint64_t value) { return (value + kAlign - 1) / kAlign * kAlign; }

// The state words are shared between processes: only a lock-free atomic works there.
static_assert(std::atomic_ref<std::uint32_t>::is_always_lock_free);
std::atomic_ref<std::uint32_t> word(std::uint32_t& value) { return std::atomic_ref<std::uint32_t>(value); }

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// The segment behind `fd` shrunk to a header that says "failed": the processes that attach fall
// back to their own copies at once. Without even that, the name goes and they time out instead.
void mark_failed(int fd, const SharedCacheOptions& options) {
  const std::uint64_t size = align(sizeof(Header));
  if (::ftruncate(fd, static_cast<off_t>(size)) == 0 && ::posix_fallocate(fd, 0, static_cast<off_t>(size)) == 0) {
    void* page = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (page != MAP_FAILED) {
      auto* header = static_cast<Header*>(page);
      header->magic = kMagic;
      word(header->status).store(Status::failed, std::memory_order_release);
      if (word(header->attached).fetch_add(1) + 1 >= static_cast<std::uint32_t>(options.processes)) ::shm_unlink(options.name.c_str());
      ::munmap(page, size);
      return;
    }
  }
  ::shm_unlink(options.name.c_str());
}

}  // namespace

struct SharedImageCache::Slot {
  std::uint32_t state;  // SlotState
  std::int32_t rows;
  std::int32_t cols;
  std::uint32_t unused;
  std::uint64_t offset;    // from the segment's start
  std::uint64_t capacity;  // bytes
};

std::optional<std::uint64_t> SharedImageCache::free_bytes() {
  struct statvfs info {};
  if (::statvfs("/dev/shm", &info) != 0) return std::nullopt;
  return static_cast<std::uint64_t>(info.f_bavail) * info.f_frsize;
}

std::unique_ptr<SharedImageCache> SharedImageCache::open(const SharedCacheOptions& options,
                                                         const std::vector<std::pair<int, int>>& capacity,
                                                         std::string& why_not) {
  // The layout every process computes alike: header, slot table, then each slot's pixels.
  const std::uint64_t slots_at = align(sizeof(Header));
  std::uint64_t total = align(slots_at + capacity.size() * sizeof(Slot));
  std::uint64_t layout = 1469598103934665603ULL;
  std::vector<std::uint64_t> offsets;
  offsets.reserve(capacity.size());
  for (const auto& [rows, cols] : capacity) {
    offsets.push_back(total);
    total = align(total + static_cast<std::uint64_t>(rows) * static_cast<std::uint64_t>(cols) * 3);
    layout = (layout ^ (static_cast<std::uint64_t>(rows) << 32 | static_cast<std::uint32_t>(cols))) * 1099511628211ULL;
  }

  std::unique_ptr<SharedImageCache> cache(new SharedImageCache());
  cache->name_ = options.name;
  cache->creator_ = options.create;
  cache->count_ = capacity.size();
  const auto join = [&](Header* header) {  // the last process to join removes the name
    if (word(header->attached).fetch_add(1) + 1 >= static_cast<std::uint32_t>(options.processes)) ::shm_unlink(options.name.c_str());
  };

  if (options.create) {
    ::shm_unlink(options.name.c_str());  // a left-over of a killed run with this name
    Fd fd(::shm_open(options.name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600));
    if (fd.get() < 0) {
      why_not = fmt::format("shm_open {}: {}", options.name, std::strerror(errno));
      return nullptr;
    }
    if (const int error = ::posix_fallocate(fd.get(), 0, static_cast<off_t>(total)); error != 0) {
      why_not = fmt::format("{:.2f} GB could not be reserved in /dev/shm ({})", static_cast<double>(total) / 1e9, std::strerror(error));
      mark_failed(fd.get(), options);
      return nullptr;
    }
    void* base = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
    if (base == MAP_FAILED) {
      why_not = fmt::format("mmap of {:.2f} GB: {}", static_cast<double>(total) / 1e9, std::strerror(errno));
      mark_failed(fd.get(), options);
      return nullptr;
    }
    cache->base_ = base;
    cache->size_ = total;
    auto* header = static_cast<Header*>(base);
    cache->slots_ = reinterpret_cast<Slot*>(static_cast<unsigned char*>(base) + slots_at);
    for (std::size_t i = 0; i < capacity.size(); ++i) {  // posix_fallocate zeroed the rest: every slot empty
      cache->slots_[i].offset = offsets[i];
      cache->slots_[i].capacity = static_cast<std::uint64_t>(capacity[i].first) * static_cast<std::uint64_t>(capacity[i].second) * 3;
    }
    header->magic = kMagic;
    header->slots = capacity.size();
    header->total = total;
    header->layout = layout;
    word(header->status).store(Status::ready, std::memory_order_release);
    join(header);
    cache->data_ = static_cast<unsigned char*>(base);
    return cache;
  }

  // Attach: wait for the creator's segment and for its verdict.
  const auto deadline = std::chrono::steady_clock::now() + options.attach_timeout;
  const auto waited_too_long = [&](const char* what) {
    if (std::chrono::steady_clock::now() < deadline) return false;
    why_not = fmt::format("{} within {} s", what, std::chrono::duration_cast<std::chrono::seconds>(options.attach_timeout).count());
    return true;
  };
  int raw = -1;
  while ((raw = ::shm_open(options.name.c_str(), O_RDWR, 0600)) < 0) {
    if (errno != ENOENT) {
      why_not = fmt::format("shm_open {}: {}", options.name, std::strerror(errno));
      return nullptr;
    }
    if (waited_too_long("the process that makes the shared copy did not create it")) return nullptr;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  Fd fd(raw);
  struct stat info {};
  while (::fstat(fd.get(), &info) == 0 && static_cast<std::uint64_t>(info.st_size) < slots_at) {
    if (waited_too_long("the shared copy was not sized")) return nullptr;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  void* page = ::mmap(nullptr, slots_at, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (page == MAP_FAILED) {
    why_not = fmt::format("mmap: {}", std::strerror(errno));
    return nullptr;
  }
  auto* header = static_cast<Header*>(page);
  std::uint32_t status = Status::creating;
  while ((status = word(header->status).load(std::memory_order_acquire)) == Status::creating) {
    if (waited_too_long("the shared copy was not ready")) {
      ::munmap(page, slots_at);
      return nullptr;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const bool same = status == Status::ready && header->magic == kMagic && header->total == total && header->layout == layout &&
                    header->slots == capacity.size();
  if (!same) {
    why_not = status == Status::failed ? "the process that makes the shared copy could not reserve it in /dev/shm"
                                       : "the shared copy's layout differs from this process's dataset";
    join(header);
    ::munmap(page, slots_at);
    return nullptr;
  }
  ::munmap(page, slots_at);
  void* base = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (base == MAP_FAILED) {
    why_not = fmt::format("mmap of {:.2f} GB: {}", static_cast<double>(total) / 1e9, std::strerror(errno));
    return nullptr;
  }
  cache->base_ = base;
  cache->size_ = total;
  cache->slots_ = reinterpret_cast<Slot*>(static_cast<unsigned char*>(base) + slots_at);
  cache->data_ = static_cast<unsigned char*>(base);
  join(static_cast<Header*>(base));
  return cache;
}

void SharedImageCache::decline(const SharedCacheOptions& options) {
  ::shm_unlink(options.name.c_str());
  Fd fd(::shm_open(options.name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600));
  if (fd.get() >= 0) mark_failed(fd.get(), options);
}

SharedImageCache::~SharedImageCache() {
  if (base_) ::munmap(base_, size_);
  if (creator_) ::shm_unlink(name_.c_str());  // a process that never came leaves no name behind
}

cv::Mat SharedImageCache::get(std::size_t index) const {
  if (index >= count_) return {};
  Slot& slot = slots_[index];
  if (word(slot.state).load(std::memory_order_acquire) != SlotState::filled) return {};
  return cv::Mat(slot.rows, slot.cols, CV_8UC3, data_ + slot.offset);
}

void SharedImageCache::put(std::size_t index, const cv::Mat& image) {
  if (index >= count_) return;
  Slot& slot = slots_[index];
  std::uint32_t expected = SlotState::empty;
  if (!word(slot.state).compare_exchange_strong(expected, SlotState::filling, std::memory_order_acq_rel)) return;
  const std::uint64_t bytes = static_cast<std::uint64_t>(image.rows) * static_cast<std::uint64_t>(image.cols) * 3;
  if (image.type() != CV_8UC3 || bytes > slot.capacity) {
    word(slot.state).store(SlotState::unusable, std::memory_order_release);  // decoded privately from now on
    return;
  }
  const std::size_t row_bytes = static_cast<std::size_t>(image.cols) * 3;
  for (int r = 0; r < image.rows; ++r) std::memcpy(data_ + slot.offset + r * row_bytes, image.ptr(r), row_bytes);
  slot.rows = image.rows;
  slot.cols = image.cols;
  word(slot.state).store(SlotState::filled, std::memory_order_release);
}

}  // namespace libreyolo::data
