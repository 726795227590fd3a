// What this build and this machine have: versions, CUDA stack, devices, CPU threads. Printed by
// `libreyolo checks` / `version` and recorded in profiles.
#pragma once

#include "cuda/cuda_info.h"

#include <nlohmann/json_fwd.hpp>

#include <string>
#include <vector>

namespace libreyolo {

struct SystemInfo {
  std::string libreyolo_version;
  std::string git_revision;
  std::string torch_version;
  std::string opencv_version;
  int cpu_threads = 0;       // CPUs this process may use (usable_cpus)
  int torch_threads = 0;     // intra-op threads LibTorch uses
  std::string allocator;     // the process's malloc: "tcmalloc 2.10", "jemalloc" or "glibc malloc"
  bool cupti_compiled = false;
  std::vector<std::string> dist_backends;  // c10d backends compiled in (gloo, nccl)
  cuda::CudaInfo cuda;
};

// CPUs this process may use: its affinity mask (taskset, a container's cpuset), capped by a
// cgroup v2 CPU quota (docker --cpus) rounded up. Never below 1.
int usable_cpus();

// The malloc this process runs on: tcmalloc when the binary links it (-Dtcmalloc) or it is
// preloaded, found by its tc_version symbol; "jemalloc" when preloaded (its mallctl); otherwise
// "glibc malloc".
std::string malloc_name();

// LibTorch's default intra-op thread count is the machine's physical cores, whatever share of
// them this process has; with more threads than usable CPUs they wait on each other at every
// barrier. Unless OMP_NUM_THREADS says otherwise, this caps the count at usable_cpus().
void choose_intra_op_threads();

SystemInfo collect_system_info();
std::string format_system_info(const SystemInfo& info);
nlohmann::json system_info_json(const SystemInfo& info);

}  // namespace libreyolo
