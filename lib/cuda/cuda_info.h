// What the CUDA side of this build has and what devices the machine shows. The CUDA build
// implements this in cuda_info.cpp; a CPU-only LibTorch build gets cuda_info_cpu.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace libreyolo::cuda {

struct DeviceInfo {
  int index = 0;
  std::string name;
  std::uint64_t total_memory_bytes = 0;
  int compute_major = 0;
  int compute_minor = 0;
};

struct CudaInfo {
  bool compiled = false;              // the binary links libtorch_cuda
  std::string runtime_version;        // CUDA runtime LibTorch was built with, e.g. "13.0"
  std::string cudnn_version;          // e.g. "9.19.0"; empty if unavailable
  std::string nccl_version;           // e.g. "2.28.9"; empty if unavailable
  std::string cupti_version;          // CUPTI API version; empty when CUPTI is not compiled in
  std::vector<DeviceInfo> devices;    // empty: no CUDA device
  std::string device_error;           // why no device could be queried, if that failed
};

CudaInfo query_cuda_info();

// Memory the caching allocator holds on `device` (what Ultralytics' GPU_mem column shows), in
// bytes; 0 without CUDA.
std::uint64_t cuda_reserved_bytes(int device);

// The caching allocator's view of one device, for the profiler: peak allocated bytes since the
// last reset_allocator_peak, and how often it called cudaMalloc / cudaFree. All 0 without CUDA.
struct AllocatorStats {
  std::uint64_t peak_allocated_bytes = 0;
  std::int64_t device_allocations = 0;
  std::int64_t device_frees = 0;
};
AllocatorStats allocator_stats(int device);
void reset_allocator_peak(int device);
void synchronize(int device);  // waits for all work on the device; nothing without CUDA
void set_current_device(int device);  // a data-parallel rank's GPU; nothing without CUDA
// An event recorded now on `device`'s current stream, as a query: true once the work queued so far
// (a non_blocking copy) has finished. Always true without CUDA.
std::function<bool()> completion_marker(int device);
// CUDA's sync debug mode: every operation that synchronises the host with a device warns
// ("called a synchronizing CUDA operation") while on. Nothing without CUDA.
void set_sync_warnings(bool on);

}  // namespace libreyolo::cuda
