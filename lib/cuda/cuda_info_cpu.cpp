// Build without CUDA (-Dcuda=disabled or a CPU-only LibTorch): nothing CUDA is linked.
#include "cuda/cuda_info.h"

namespace libreyolo::cuda {

std::uint64_t cuda_reserved_bytes(int) { return 0; }
AllocatorStats allocator_stats(int) { return {}; }
void reset_allocator_peak(int) {}
void synchronize(int) {}
void set_current_device(int) {}
void set_sync_warnings(bool) {}
std::function<bool()> completion_marker(int) {
  return [] { return true; };
}

CudaInfo query_cuda_info() {
  CudaInfo info;
  info.device_error = "this build has no CUDA";
  return info;
}

}  // namespace libreyolo::cuda
