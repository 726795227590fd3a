// The CUPTI collector's record handling, fed hand-made records (no GPU needed).
#include "profile/cupti_records.h"

#include <cstring>

#include "catch.h"  // last: see catch.h

using namespace libreyolo::profile;

namespace {

CUpti_ActivityKernel10 kernel(const char* name, std::uint64_t start, std::uint64_t end, std::uint32_t correlation,
                              std::uint32_t graph = 0) {
  CUpti_ActivityKernel10 k;
  std::memset(&k, 0, sizeof k);
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.name = name;
  k.start = start, k.end = end;
  k.deviceId = 1, k.streamId = 7;
  k.correlationId = correlation;
  k.graphId = graph;
  return k;
}

}  // namespace

TEST_CASE("CUPTI records: kernels, graph kernels, memcpy/memset, runtime calls, bad timestamps", "[cupti]") {
  KernelRecords out;
  const auto gemm = kernel("_Z10gemmKernelPfS_i", 2'000'000, 2'015'000, 11);
  add_activity_record(reinterpret_cast<const CUpti_Activity*>(&gemm), 42, out);
  // two kernels of one CUDA graph launch: same correlation id, both kept
  const auto graph_a = kernel("graph_kernel_a", 3'000'000, 3'004'000, 12, 5);
  const auto graph_b = kernel("graph_kernel_b", 3'004'000, 3'010'000, 12, 5);
  add_activity_record(reinterpret_cast<const CUpti_Activity*>(&graph_a), 42, out);
  add_activity_record(reinterpret_cast<const CUpti_Activity*>(&graph_b), 42, out);
  // zero and reversed timestamps are counted and dropped
  const auto zero = kernel("zero", 0, 0, 13);
  const auto reversed = kernel("reversed", 5'000'000, 4'000'000, 14);
  add_activity_record(reinterpret_cast<const CUpti_Activity*>(&zero), 42, out);
  add_activity_record(reinterpret_cast<const CUpti_Activity*>(&reversed), 42, out);

  CUpti_ActivityMemcpy6 copy;
  std::memset(&copy, 0, sizeof copy);
  copy.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  copy.start = 1'000'000, copy.end = 1'002'000, copy.bytes = 4096, copy.deviceId = 1, copy.streamId = 7, copy.correlationId = 10;
  add_activity_record(reinterpret_cast<const CUpti_Activity*>(&copy), 42, out);
  CUpti_ActivityMemset4 set;
  std::memset(&set, 0, sizeof set);
  set.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  set.start = 1'500'000, set.end = 1'500'500, set.bytes = 64, set.deviceId = 1, set.correlationId = 9;
  add_activity_record(reinterpret_cast<const CUpti_Activity*>(&set), 42, out);

  CUpti_ActivityAPI launch;
  std::memset(&launch, 0, sizeof launch);
  launch.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  launch.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
  launch.start = 1'900'000, launch.end = 1'905'000, launch.threadId = 99, launch.correlationId = 11;
  add_activity_record(reinterpret_cast<const CUpti_Activity*>(&launch), 42, out);
  CUpti_ActivityAPI graph_launch = launch;
  graph_launch.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000;
  graph_launch.start = 2'900'000, graph_launch.end = 2'901'000, graph_launch.correlationId = 12;
  add_activity_record(reinterpret_cast<const CUpti_Activity*>(&graph_launch), 42, out);

  CHECK(out.invalid == 2);
  REQUIRE(out.events.size() == 7);
  const Event& k = out.events[0];
  CHECK(k.name == "gemmKernel(float*, float*, int)");  // demangled
  CHECK(k.category == category::kernel);
  CHECK(k.start_us == 2000.0);
  CHECK(k.duration_us == 15.0);
  CHECK(k.pid == kGpuProcessBase + 1);
  CHECK(k.tid == 7);
  CHECK(out.events[1].correlation == 12);
  CHECK(out.events[2].correlation == 12);
  CHECK(out.events[3].category == category::memcpy);
  CHECK(out.events[3].name.find("4096 bytes") != std::string::npos);
  CHECK(out.events[4].category == category::memset);
  CHECK(out.events[5].category == category::runtime);
  CHECK(out.events[5].pid == 42);
  CHECK(out.events[5].tid == 99);

  const auto flows = launch_flows(out.events);
  REQUIRE(flows.size() == 3);  // the plain launch, and one arrow to each graph kernel
  CHECK(flows[0].from_us == 1900.0);
  CHECK(flows[0].to_us == 2000.0);
  CHECK(flows[1].id == 12);
  CHECK(flows[2].id == 12);
}
