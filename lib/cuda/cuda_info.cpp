#include "cuda/cuda_info.h"

#include "build_config.h"

#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <fmt/format.h>
#include <torch/csrc/cuda/nccl.h>

#if LIBREYOLO_HAVE_CUPTI
#include <cupti.h>
#endif

namespace libreyolo::cuda {

namespace {

// CUDA and cuDNN encode versions as integers: 13000 -> 13.0, 91900 -> 9.19.0.
std::string cuda_version_text(long version) {
  return fmt::format("{}.{}", version / 1000, (version % 1000) / 10);
}

std::string cudnn_version_text(long version) {
  return fmt::format("{}.{}.{}", version / 10000, (version % 10000) / 100, version % 100);
}

}  // namespace

std::uint64_t cuda_reserved_bytes(int device) {
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(device));
  return static_cast<std::uint64_t>(stats.reserved_bytes[static_cast<std::size_t>(c10::CachingAllocator::StatType::AGGREGATE)].current);
}

AllocatorStats allocator_stats(int device) {
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(device));
  return {.peak_allocated_bytes = static_cast<std::uint64_t>(
              stats.allocated_bytes[static_cast<std::size_t>(c10::CachingAllocator::StatType::AGGREGATE)].peak),
          .device_allocations = stats.num_device_alloc,
          .device_frees = stats.num_device_free};
}

void reset_allocator_peak(int device) {
  c10::cuda::CUDACachingAllocator::resetPeakStats(static_cast<c10::DeviceIndex>(device));
}

void synchronize(int device) {
  const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
  c10::cuda::device_synchronize();
}

void set_current_device(int device) { c10::cuda::set_device(static_cast<c10::DeviceIndex>(device)); }

std::function<bool()> completion_marker(int device) {
  auto event = std::make_shared<at::cuda::CUDAEvent>();
  event->record(c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device)));
  return [event] { return event->query(); };
}

void set_sync_warnings(bool on) {
  c10::cuda::warning_state().set_sync_debug_mode(on ? c10::cuda::SyncDebugMode::L_WARN : c10::cuda::SyncDebugMode::L_DISABLED);
}

CudaInfo query_cuda_info() {
  CudaInfo info;
  info.compiled = true;
  const auto& hooks = at::detail::getCUDAHooks();
  try {
    info.runtime_version = cuda_version_text(hooks.versionCUDART());
  } catch (const std::exception&) {
    info.runtime_version = "unknown";
  }
  try {
    info.cudnn_version = cudnn_version_text(hooks.versionCuDNN());
  } catch (const std::exception&) {
  }
  try {
    const std::uint64_t nccl = torch::cuda::nccl::version();
    info.nccl_version = fmt::format("{}.{}.{}", nccl >> 32, (nccl >> 16) & 0xffff, nccl & 0xffff);
  } catch (const std::exception&) {
  }
#if LIBREYOLO_HAVE_CUPTI
  uint32_t cupti_version = 0;
  if (cuptiGetVersion(&cupti_version) == CUPTI_SUCCESS) info.cupti_version = fmt::format("{}", cupti_version);
#endif

  // device_count_ensure_non_zero would throw; device_count() returns 0 when there is no driver.
  const int count = static_cast<int>(c10::cuda::device_count());
  if (count == 0) {
    info.device_error = "no CUDA device";
    return info;
  }
  for (int index = 0; index < count; ++index) {
    const cudaDeviceProp* properties = at::cuda::getDeviceProperties(index);
    info.devices.push_back(DeviceInfo{index, properties->name, static_cast<std::uint64_t>(properties->totalGlobalMem),
                                      properties->major, properties->minor});
  }
  return info;
}

}  // namespace libreyolo::cuda
