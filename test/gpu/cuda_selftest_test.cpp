// GPU suite: a side stream, autocast and a CUDA graph capture/replay on cuda:0 must match eager.
// Exits 77 (meson: skipped) when the machine has no CUDA device.
#include "cuda/cuda_info.h"
#include "cuda/cuda_selftest.h"

#include <fmt/core.h>

int main() {
  const auto info = libreyolo::cuda::query_cuda_info();
  if (info.devices.empty()) {
    fmt::print("skipped: {}\n", info.device_error);
    return 77;
  }
  const auto result = libreyolo::cuda::run_selftest(0);
  fmt::print("device {}: stream {} autocast-float16 {} autocast-bfloat16 {} graph {} {}\n", info.devices[0].name,
             result.stream_ok, result.autocast_float16_ok, result.autocast_bfloat16_ok, result.graph_ok, result.detail);
  // H100/H200-class devices support bf16; a failure there is a real failure.
  const bool bf16_expected = info.devices[0].compute_major >= 8;
  return result.passed() && (!bf16_expected || result.autocast_bfloat16_ok) ? 0 : 1;
}
