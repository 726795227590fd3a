#include "cuda/cuda_selftest.h"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <fmt/format.h>

namespace libreyolo::cuda {

namespace {

// Restores the thread's CUDA autocast state on scope exit.
class CudaAutocast {
 public:
  explicit CudaAutocast(at::ScalarType dtype)
      : was_enabled_(at::autocast::is_autocast_enabled(at::kCUDA)),
        previous_dtype_(at::autocast::get_autocast_dtype(at::kCUDA)) {
    at::autocast::set_autocast_enabled(at::kCUDA, true);
    at::autocast::set_autocast_dtype(at::kCUDA, dtype);
  }
  ~CudaAutocast() {
    at::autocast::set_autocast_enabled(at::kCUDA, was_enabled_);
    at::autocast::set_autocast_dtype(at::kCUDA, previous_dtype_);
    at::autocast::clear_cache();
  }
  CudaAutocast(const CudaAutocast&) = delete;
  CudaAutocast& operator=(const CudaAutocast&) = delete;

 private:
  bool was_enabled_;
  at::ScalarType previous_dtype_;
};

bool autocast_matmul_ok(const at::Tensor& a, const at::Tensor& b, at::ScalarType dtype) {
  const at::Tensor reference = at::matmul(a, b);
  at::Tensor result;
  {
    CudaAutocast autocast(dtype);
    result = at::matmul(a, b);
  }
  return result.scalar_type() == dtype && at::allclose(result.to(at::kFloat), reference, 5e-2, 5e-1);
}

at::Tensor small_network(const at::Tensor& input, const at::Tensor& weight) {
  return at::relu(at::matmul(input, weight)).sum(1);
}

}  // namespace

SelfTestResult run_selftest(int device_index) {
  SelfTestResult result;
  if (c10::cuda::device_count() <= device_index) {
    result.detail = "no CUDA device";
    return result;
  }
  result.ran = true;
  try {
    c10::cuda::CUDAGuard device_guard(static_cast<c10::DeviceIndex>(device_index));
    const auto options = at::TensorOptions().device(at::kCUDA, device_index).dtype(at::kFloat);
    const at::Tensor a = at::randn({128, 256}, options);
    const at::Tensor b = at::randn({256, 64}, options);
    const at::Tensor eager = small_network(a, b);

    // Graph capture must happen off the default stream.
    c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device_index);
    c10::cuda::getCurrentCUDAStream(device_index).synchronize();  // inputs are ready before the side stream reads them
    {
      c10::cuda::CUDAStreamGuard stream_guard(side);
      result.stream_ok = at::allclose(small_network(a, b), eager, 1e-4, 1e-4);

      result.autocast_float16_ok = autocast_matmul_ok(a, b, at::kHalf);
      result.autocast_bfloat16_ok = at::cuda::getCurrentDeviceProperties()->major >= 8 &&
                                    autocast_matmul_ok(a, b, at::kBFloat16);

      at::Tensor static_input = a.clone();
      at::cuda::CUDAGraph graph;
      small_network(static_input, b);  // warm-up allocates the workspaces outside the capture
      side.synchronize();
      graph.capture_begin();
      at::Tensor static_output = small_network(static_input, b);
      graph.capture_end();

      const at::Tensor fresh = at::randn({128, 256}, options);
      static_input.copy_(fresh);
      graph.replay();
      side.synchronize();
      result.graph_ok = at::allclose(static_output, small_network(fresh, b), 1e-4, 1e-4);
    }
    c10::cuda::device_synchronize();
  } catch (const std::exception& error) {
    result.detail = error.what();
    return result;
  }
  if (!result.passed()) {
    result.detail = fmt::format("stream {} autocast-float16 {} graph {}", result.stream_ok, result.autocast_float16_ok,
                                result.graph_ok);
  }
  return result;
}

}  // namespace libreyolo::cuda
