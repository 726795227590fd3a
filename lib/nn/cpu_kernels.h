// Which of our per-ISA CPU kernels (nn/bn_silu_kernel.cpp, nn/bce_logits_kernel.cpp: each compiled
// once per capability, lib/meson.build) run: ATen's own choice (cpuinfo, capped by
// ATEN_CPU_CAPABILITY), so that ours and ATen's run the same instructions.
#pragma once

#include <vector>

namespace libreyolo::nn {

enum class CpuKernels { Default, Avx2, Avx512 };

// The capability in use, decided once per process.
CpuKernels cpu_kernels();
// "DEFAULT", "AVX2" or "AVX512", as ATen names them.
const char* cpu_kernels_name(CpuKernels kernels);
// The vectorised capabilities this CPU can run, whatever ATen picked (tests run each against DEFAULT).
std::vector<CpuKernels> runnable_vectorised_cpu_kernels();

}  // namespace libreyolo::nn
