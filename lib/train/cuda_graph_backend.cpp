// The CUDA build's CaptureBackend: at::cuda::CUDAGraph, captured on a side stream in thread-local
// mode (another thread's cudaHostAlloc, a pinned batch in a loader, cannot invalidate it), every
// graph of one capture in one private pool.
#include "cuda/cuda_info.h"
#include "train/cuda_graph.h"
#include "train/host_reads.h"

#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace libreyolo::train {

namespace {

class CudaGraphBackend final : public CaptureBackend {
 public:
  explicit CudaGraphBackend(int device) : device_(static_cast<c10::DeviceIndex>(device)) {}

  void warm_up(const std::function<void()>& work) override {
    if (graphs_.empty() && reserved_before_ == 0) reserved_before_ = cuda::cuda_reserved_bytes(device_);
    on_side_stream(work);
  }

  std::size_t capture(const std::function<void()>& work) override {
    if (reserved_before_ == 0) reserved_before_ = cuda::cuda_reserved_bytes(device_);
    if (!pool_) pool_ = at::cuda::graph_pool_handle();
    auto graph = std::make_unique<at::cuda::CUDAGraph>();
    const HostReadWatch watch;  // what to name when CUDA refuses the capture
    try {
      on_side_stream([&] {
        graph->capture_begin(*pool_, cudaStreamCaptureModeThreadLocal);
        try {
          work();
        } catch (...) {
          try {
            graph->capture_end();  // leave the stream usable
          } catch (...) {
          }
          throw;
        }
        graph->capture_end();
      });
    } catch (const std::exception& error) {
      if (watch.empty()) throw;
      throw std::runtime_error(fmt::format("{}; {}", error.what(), host_read_refusal(watch)));
    }
    graphs_.push_back(std::move(graph));
    const std::uint64_t reserved = cuda::cuda_reserved_bytes(device_);
    pool_bytes_ = reserved > reserved_before_ ? reserved - reserved_before_ : 0;
    return graphs_.size() - 1;
  }

  void replay(std::size_t graph) override { graphs_.at(graph)->replay(); }

  void reset() override {
    cuda::synchronize(device_);  // the errors of a failed capture or replay surface here, not later
    graphs_.clear();
    pool_.reset();
    pool_bytes_ = 0;
    reserved_before_ = 0;
  }

  std::uint64_t pool_bytes() const override { return pool_bytes_; }

 private:
  // `work` on a side stream that starts after, and ends before, the current stream's work.
  void on_side_stream(const std::function<void()>& work) {
    const c10::cuda::CUDAGuard device_guard(device_);
    const c10::cuda::CUDAStream current = c10::cuda::getCurrentCUDAStream(device_);
    if (!side_) {  // the thread's own stream (use_capture_stream), else one from the pool
      side_ = current != c10::cuda::getDefaultCUDAStream(device_) ? current
                                                                  : c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device_);
    }
    at::cuda::CUDAEvent ready;
    ready.record(current);
    ready.block(*side_);
    {
      const c10::cuda::CUDAStreamGuard stream_guard(*side_);
      work();
    }
    at::cuda::CUDAEvent done;
    done.record(*side_);
    done.block(current);
  }

  c10::DeviceIndex device_;
  std::optional<c10::cuda::CUDAStream> side_;
  std::optional<at::cuda::MempoolId_t> pool_;
  std::vector<std::unique_ptr<at::cuda::CUDAGraph>> graphs_;
  std::uint64_t reserved_before_ = 0, pool_bytes_ = 0;
};

}  // namespace

std::shared_ptr<void> use_capture_stream(int device) {
  const auto index = static_cast<c10::DeviceIndex>(device);
  const c10::cuda::CUDAStream before = c10::cuda::getCurrentCUDAStream(index);
  cuda::synchronize(device);  // the legacy stream's work (the weights' upload) done before the new stream starts
  c10::cuda::setCurrentCUDAStream(c10::cuda::getStreamFromPool(/*isHighPriority=*/false, index));
  return std::shared_ptr<void>(nullptr, [before, device](void*) {
    try {
      cuda::synchronize(device);
    } catch (...) {  // a failed run's error was reported where it happened
    }
    c10::cuda::setCurrentCUDAStream(before);
  });
}

std::unique_ptr<CaptureBackend> make_cuda_graph_backend(int device, std::string& why_not) {
  if (device < 0) {
    why_not = "device is not CUDA";
    return nullptr;
  }
  return std::make_unique<CudaGraphBackend>(device);
}

}  // namespace libreyolo::train
