#include "profile/cupti_records.h"

#include <cxxabi.h>
#include <fmt/core.h>

#include <cstdlib>
#include <unordered_map>

namespace libreyolo::profile {

namespace {

std::string demangle(const char* name) {
  if (!name) return "unknown kernel";
  int status = 0;
  char* text = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string result = status == 0 && text ? text : name;
  std::free(text);
  return result;
}

// False (and counted) for zero or reversed timestamps, which CUPTI can report.
bool keep(std::uint64_t start, std::uint64_t end, KernelRecords& out) {
  const bool valid = start != 0 && end != 0 && end >= start;
  if (!valid) ++out.invalid;
  return valid;
}

Event gpu_event(std::string name, const char* category, std::uint64_t start, std::uint64_t end, std::uint32_t device,
                std::uint32_t stream, std::uint32_t correlation) {
  return {.name = std::move(name), .category = category, .start_us = start / 1000.0, .duration_us = (end - start) / 1000.0,
          .pid = kGpuProcessBase + device, .tid = static_cast<std::int64_t>(stream), .correlation = correlation};
}

}  // namespace

void add_activity_record(const CUpti_Activity* record, std::int64_t pid, KernelRecords& out) {
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      if (!keep(k->start, k->end, out)) return;
      // A CUDA graph's kernels all carry the graph launch's correlation id: kept, one event each.
      out.events.push_back(gpu_event(demangle(k->name), category::kernel, k->start, k->end, k->deviceId, k->streamId, k->correlationId));
      return;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
      if (!keep(m->start, m->end, out)) return;
      out.events.push_back(gpu_event(fmt::format("Memcpy {} ({} bytes)", static_cast<int>(m->copyKind), m->bytes), category::memcpy,
                                     m->start, m->end, m->deviceId, m->streamId, m->correlationId));
      return;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
      if (!keep(m->start, m->end, out)) return;
      out.events.push_back(gpu_event(fmt::format("Memset ({} bytes)", m->bytes), category::memset, m->start, m->end, m->deviceId,
                                     m->streamId, m->correlationId));
      return;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME: {
      const auto* api = reinterpret_cast<const CUpti_ActivityAPI*>(record);
      if (!keep(api->start, api->end, out)) return;
      const char* name = nullptr;
      if (cuptiGetCallbackName(CUPTI_CB_DOMAIN_RUNTIME_API, api->cbid, &name) != CUPTI_SUCCESS) name = nullptr;
      out.events.push_back({.name = name ? name : fmt::format("cuda runtime call {}", api->cbid), .category = category::runtime,
                            .start_us = api->start / 1000.0, .duration_us = (api->end - api->start) / 1000.0, .pid = pid,
                            .tid = static_cast<std::int64_t>(api->threadId), .correlation = api->correlationId});
      return;
    }
    default:
      return;
  }
}

std::vector<Flow> launch_flows(const std::vector<Event>& events) {
  std::unordered_map<std::int64_t, const Event*> launches;
  for (const auto& e : events) {
    if (e.category == category::runtime && e.correlation >= 0) launches[e.correlation] = &e;
  }
  std::vector<Flow> flows;
  for (const auto& e : events) {
    if (e.category != category::kernel) continue;
    const auto launch = launches.find(e.correlation);
    if (launch == launches.end()) continue;
    flows.push_back({.id = e.correlation, .from_us = launch->second->start_us, .to_us = e.start_us,
                     .from_pid = launch->second->pid, .from_tid = launch->second->tid, .to_pid = e.pid, .to_tid = e.tid});
  }
  return flows;
}

}  // namespace libreyolo::profile
