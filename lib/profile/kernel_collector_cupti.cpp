// The CUPTI activity API, as Kineto uses it: 4 MB buffers handed out on request and parsed when
// CUPTI returns them, a forced flush at the end, our steady clock for every record, the record
// structs of this CUDA version, zero timestamps filtered and CUDA-graph kernels kept.
#include "profile/kernel_collector.h"

#include "profile/cpu_op_collector.h"

#include <cupti.h>
#include <cxxabi.h>
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

std::string demangle(const char* name) {
  if (!name) return "unknown kernel";
  int status = 0;
  char* text = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string result = status == 0 && text ? text : name;
  std::free(text);
  return result;
}

std::uint64_t steady_ns() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

bool valid(std::uint64_t start, std::uint64_t end) { return start != 0 && end != 0 && end >= start; }

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = kBufferBytes;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream, uint8_t* buffer, size_t, size_t valid_size) {
  KernelRecords parsed;
  const std::int64_t pid = static_cast<std::int64_t>(::getpid());
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid_size, &record) == CUPTI_SUCCESS) {
    switch (record->kind) {
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
        if (!valid(k->start, k->end)) { ++parsed.invalid; break; }
        // A graph's kernels all carry the graph launch's correlation id; they are kept.
        parsed.events.push_back({.name = demangle(k->name), .category = category::kernel, .start_us = k->start / 1000.0,
                                 .duration_us = (k->end - k->start) / 1000.0, .pid = kGpuProcessBase + k->deviceId,
                                 .tid = static_cast<std::int64_t>(k->streamId), .correlation = k->correlationId});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
        if (!valid(m->start, m->end)) { ++parsed.invalid; break; }
        parsed.events.push_back({.name = fmt::format("Memcpy {} ({} bytes)", static_cast<int>(m->copyKind), m->bytes),
                                 .category = category::memcpy, .start_us = m->start / 1000.0, .duration_us = (m->end - m->start) / 1000.0,
                                 .pid = kGpuProcessBase + m->deviceId, .tid = static_cast<std::int64_t>(m->streamId),
                                 .correlation = m->correlationId});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
        if (!valid(m->start, m->end)) { ++parsed.invalid; break; }
        parsed.events.push_back({.name = fmt::format("Memset ({} bytes)", m->bytes), .category = category::memset,
                                 .start_us = m->start / 1000.0, .duration_us = (m->end - m->start) / 1000.0,
                                 .pid = kGpuProcessBase + m->deviceId, .tid = static_cast<std::int64_t>(m->streamId),
                                 .correlation = m->correlationId});
        break;
      }
      case CUPTI_ACTIVITY_KIND_RUNTIME: {
        const auto* api = reinterpret_cast<const CUpti_ActivityAPI*>(record);
        if (!valid(api->start, api->end)) { ++parsed.invalid; break; }
        const char* name = nullptr;
        cuptiGetCallbackName(CUPTI_CB_DOMAIN_RUNTIME_API, api->cbid, &name);
        parsed.events.push_back({.name = name ? name : "cuda runtime", .category = category::runtime, .start_us = api->start / 1000.0,
                                 .duration_us = (api->end - api->start) / 1000.0, .pid = pid,
                                 .tid = static_cast<std::int64_t>(api->threadId), .correlation = api->correlationId});
        break;
      }
      default:
        break;
    }
  }
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
    // Launch -> kernel arrows, as torch's "ac2g" flows.
    std::unordered_map<std::uint32_t, const Event*> launches;
    for (const auto& e : out.events) {
      if (e.category == category::runtime && e.correlation >= 0) launches[static_cast<std::uint32_t>(e.correlation)] = &e;
    }
    for (const auto& e : out.events) {
      if (e.category != category::kernel) continue;
      const auto launch = launches.find(static_cast<std::uint32_t>(e.correlation));
      if (launch == launches.end()) continue;
      out.flows.push_back({.id = e.correlation, .from_us = launch->second->start_us, .to_us = e.start_us,
                           .from_pid = launch->second->pid, .from_tid = launch->second->tid, .to_pid = e.pid, .to_tid = e.tid});
    }
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
