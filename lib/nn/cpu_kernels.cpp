#include "nn/cpu_kernels.h"

#include <ATen/Version.h>

#include <string>

namespace libreyolo::nn {

CpuKernels cpu_kernels() {
  static const CpuKernels kernels = [] {
#if defined(__x86_64__)
    const std::string capability = at::get_cpu_capability();
    if (capability == "AVX512") return CpuKernels::Avx512;
    if (capability == "AVX2") return CpuKernels::Avx2;
#endif
    return CpuKernels::Default;
  }();
  return kernels;
}

const char* cpu_kernels_name(CpuKernels kernels) {
  switch (kernels) {
    case CpuKernels::Avx512: return "AVX512";
    case CpuKernels::Avx2: return "AVX2";
    case CpuKernels::Default: break;
  }
  return "DEFAULT";
}

std::vector<CpuKernels> runnable_vectorised_cpu_kernels() {
  std::vector<CpuKernels> runnable;
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) runnable.push_back(CpuKernels::Avx2);
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512dq")) {
    runnable.push_back(CpuKernels::Avx512);
  }
#endif
  return runnable;
}

}  // namespace libreyolo::nn
