// GPU activity through the CUPTI activity API: kernels (CUDA-graph kernels included), memcpy,
// memset and the runtime calls that launched them. One owner of CUPTI per process; when CUPTI
// cannot be had, start() says why and the profiler reports that instead of drawing a verdict.
#pragma once

#include "profile/trace.h"

#include <memory>
#include <string>

namespace libreyolo::profile {

struct KernelRecords {
  std::vector<Event> events;   // kernel, gpu_memcpy, gpu_memset, cuda_runtime
  std::vector<Flow> flows;     // launch -> kernel
  std::int64_t dropped = 0;    // records CUPTI dropped for lack of buffer space
  std::int64_t invalid = 0;    // records with zero or reversed timestamps, filtered out
};

class KernelCollector {
 public:
  virtual ~KernelCollector() = default;
  // Flushes CUPTI (the device must have been synchronised) and stops collecting.
  virtual KernelRecords stop() = 0;
};

// nullptr and `why_not` filled when no collection is possible (CPU build, no CUPTI, another
// subscriber, permissions).
std::unique_ptr<KernelCollector> start_kernel_collector(int device, std::string& why_not);

}  // namespace libreyolo::profile
