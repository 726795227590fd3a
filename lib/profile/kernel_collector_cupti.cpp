// The CUPTI activity API, as Kineto uses it: 4 MB buffers handed out on request and parsed when
// CUPTI returns them, a forced flush at the end, our steady clock for every record, the record
// structs of this CUDA version, zero timestamps filtered and CUDA-graph kernels kept.
#include "profile/kernel_collector.h"

#include "profile/cpu_op_collector.h"
#include "profile/cupti_records.h"

#include <cupti.h>
#include <fmt/core.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <unordered_map>

namespace libreyolo::profile {

namespace {

constexpr std::size_t kBufferBytes = 4u << 20;

std::atomic<bool> cupti_owned{false};
std::mutex records_mutex;
KernelRecords* records = nullptr;  // guarded by records_mutex

std::uint64_t steady_ns() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = kBufferBytes;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream, uint8_t* buffer, size_t, size_t valid_size) {
  KernelRecords parsed;
  const std::int64_t pid = static_cast<std::int64_t>(::getpid());
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid_size, &record) == CUPTI_SUCCESS) add_activity_record(record, pid, parsed);
  size_t dropped = 0;
  cuptiActivityGetNumDroppedRecords(context, stream, &dropped);  // never under our mutex (Kineto's ABBA note)
  std::free(buffer);
  const std::lock_guard lock(records_mutex);
  if (!records) return;
  records->dropped += static_cast<std::int64_t>(dropped);
  records->invalid += parsed.invalid;
  records->events.insert(records->events.end(), std::make_move_iterator(parsed.events.begin()),
                         std::make_move_iterator(parsed.events.end()));
}

constexpr CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                         CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_RUNTIME};

std::string cupti_error(CUptiResult result) {
  const char* text = nullptr;
  cuptiGetResultString(result, &text);
  return text ? text : fmt::format("CUPTI error {}", static_cast<int>(result));
}

class CuptiCollector : public KernelCollector {
 public:
  CuptiCollector() {
    const std::lock_guard lock(records_mutex);
    records = &records_;
  }
  ~CuptiCollector() override { stop(); }

  KernelRecords stop() override {
    if (stopped_) return {};
    stopped_ = true;
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);  // without our mutex: it calls buffer_completed
    for (const auto kind : kKinds) cuptiActivityDisable(kind);
    KernelRecords out;
    {
      const std::lock_guard lock(records_mutex);
      out = std::move(records_);
      records = nullptr;
    }
    out.flows = launch_flows(out.events);  // launch -> kernel arrows, as torch's "ac2g" flows
    cupti_owned.store(false);
    return out;
  }

 private:
  KernelRecords records_;
  bool stopped_ = false;
};

}  // namespace

std::unique_ptr<KernelCollector> start_kernel_collector(int, std::string& why_not) {
  bool expected = false;
  if (!cupti_owned.compare_exchange_strong(expected, true)) {
    why_not = "another collector in this process already owns CUPTI";
    return nullptr;
  }
  // Our steady clock on every record, so GPU and CPU events share one timeline.
  cuptiActivityRegisterTimestampCallback(&steady_ns);
  if (const auto result = cuptiActivityRegisterCallbacks(&buffer_requested, &buffer_completed); result != CUPTI_SUCCESS) {
    cupti_owned.store(false);
    why_not = "CUPTI refused the activity callbacks: " + cupti_error(result);
    return nullptr;
  }
  for (const auto kind : kKinds) {
    if (const auto result = cuptiActivityEnable(kind); result != CUPTI_SUCCESS) {
      for (const auto k : kKinds) cuptiActivityDisable(k);
      cupti_owned.store(false);
      why_not = fmt::format("CUPTI refused activity kind {}: {}{}", static_cast<int>(kind), cupti_error(result),
                            result == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
                                ? " (Nsight Systems, another profiler or an injection library holds CUPTI)" : "");
      return nullptr;
    }
  }
  auto collector = std::make_unique<CuptiCollector>();
  return collector;
}

}  // namespace libreyolo::profile
