#include "profile/cpu_op_collector.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

namespace libreyolo::profile {

namespace {

constexpr std::size_t kMaxSpansPerThread = 4'000'000;

struct Span {
  std::uint32_t name;
  double start_us, end_us;
};

// One per thread that runs operators while collecting. The owning thread appends; the collector
// reads after stop(). The mutex is uncontended while collecting.
struct ThreadBuffer {
  std::mutex mutex;
  std::int64_t tid = 0;
  std::uint64_t generation = 0;
  std::vector<double> open;  // start times of the operators running now (they nest)
  std::vector<Span> spans;
  std::deque<std::string> names;  // interned: operator names may not outlive their RecordFunction
  std::unordered_map<std::string_view, std::uint32_t> ids;
  std::int64_t dropped = 0;
};

std::atomic<std::uint64_t> generation{0};  // 0: not collecting
std::mutex registry_mutex;
std::vector<std::shared_ptr<ThreadBuffer>> registry;

ThreadBuffer* thread_buffer() {
  thread_local std::shared_ptr<ThreadBuffer> buffer;
  const std::uint64_t now = generation.load(std::memory_order_acquire);
  if (!buffer || buffer->generation != now) {
    buffer = std::make_shared<ThreadBuffer>();
    buffer->tid = current_thread_id();
    buffer->generation = now;
    const std::lock_guard lock(registry_mutex);
    registry.push_back(buffer);
  }
  return buffer.get();
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction&) {
  if (generation.load(std::memory_order_relaxed) == 0) return nullptr;
  ThreadBuffer* buffer = thread_buffer();
  const std::lock_guard lock(buffer->mutex);
  buffer->open.push_back(now_us());
  return nullptr;
}

void on_end(const at::RecordFunction& function, at::ObserverContext*) {
  if (generation.load(std::memory_order_relaxed) == 0) return;
  const double end = now_us();
  ThreadBuffer* buffer = thread_buffer();
  const std::lock_guard lock(buffer->mutex);
  if (buffer->open.empty()) return;  // started before this collection began
  const double start = buffer->open.back();
  buffer->open.pop_back();
  if (buffer->spans.size() >= kMaxSpansPerThread) {
    ++buffer->dropped;
    return;
  }
  const std::string_view name(function.name());
  auto found = buffer->ids.find(name);
  if (found == buffer->ids.end()) {
    buffer->names.emplace_back(name);
    found = buffer->ids.emplace(buffer->names.back(), static_cast<std::uint32_t>(buffer->names.size() - 1)).first;
  }
  buffer->spans.push_back({found->second, start, end});
}

}  // namespace

double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::int64_t current_thread_id() {
  static thread_local const std::int64_t id = static_cast<std::int64_t>(::syscall(SYS_gettid));
  return id;
}

// Thread-local: the training thread, and the threads LibTorch hands its state to (autograd's
// device threads), but not our data-loading workers, which would only add cost.
CpuOpCollector::CpuOpCollector() {
  {
    const std::lock_guard lock(registry_mutex);
    registry.clear();
  }
  static std::atomic<std::uint64_t> next_generation{0};
  generation.store(++next_generation, std::memory_order_release);
  handle_ = at::addThreadLocalCallback(at::RecordFunctionCallback(&on_start, &on_end)
                                      .needsInputs(false)
                                      .needsOutputs(false)
                                      .needsIds(false)
                                      .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION, at::RecordScope::USER_SCOPE}));
  running_ = true;
}

CpuOpCollector::~CpuOpCollector() { stop(); }

void CpuOpCollector::stop() {
  if (!running_) return;
  generation.store(0, std::memory_order_release);
  at::removeCallback(handle_);
  running_ = false;
}

std::vector<Event> CpuOpCollector::take_events() {
  std::vector<std::shared_ptr<ThreadBuffer>> buffers;
  {
    const std::lock_guard lock(registry_mutex);
    buffers.swap(registry);
  }
  static const std::int64_t pid = static_cast<std::int64_t>(::getpid());
  std::vector<Event> events;
  for (const auto& buffer : buffers) {
    const std::lock_guard lock(buffer->mutex);
    dropped_ += buffer->dropped;
    for (const auto& s : buffer->spans) {
      events.push_back({.name = buffer->names[s.name], .category = category::cpu_op, .start_us = s.start_us,
                        .duration_us = s.end_us - s.start_us, .pid = pid, .tid = buffer->tid});
    }
  }
  return events;
}


}  // namespace libreyolo::profile
