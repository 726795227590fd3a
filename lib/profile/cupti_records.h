// CUPTI activity records to trace events, kept apart from CUPTI's buffers so that tests can feed
// hand-made records on a machine without a GPU: the record structs of this CUDA version, zero or
// reversed timestamps counted and dropped, CUDA-graph kernels kept, launch -> kernel flows.
#pragma once

#include "profile/kernel_collector.h"

#include <cupti.h>

namespace libreyolo::profile {

// Appends the event for one record (kernel, memcpy, memset, runtime call) to `out`, or counts it
// in out.invalid. Other kinds are ignored.
void add_activity_record(const CUpti_Activity* record, std::int64_t pid, KernelRecords& out);

// One arrow per kernel whose launching runtime call is in `events` (same correlation id).
std::vector<Flow> launch_flows(const std::vector<Event>& events);

}  // namespace libreyolo::profile
