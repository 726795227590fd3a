// What this build and this machine have: versions, CUDA stack, devices, CPU threads. Printed by
// `libreyolo checks` / `version` and recorded in profiles.
#pragma once

#include "cuda/cuda_info.h"

#include <nlohmann/json_fwd.hpp>

#include <string>

namespace libreyolo {

struct SystemInfo {
  std::string libreyolo_version;
  std::string git_revision;
  std::string torch_version;
  std::string opencv_version;
  int cpu_threads = 0;       // hardware threads of the machine
  int torch_threads = 0;     // intra-op threads LibTorch uses
  bool cupti_compiled = false;
  cuda::CudaInfo cuda;
};

SystemInfo collect_system_info();
std::string format_system_info(const SystemInfo& info);
nlohmann::json system_info_json(const SystemInfo& info);

}  // namespace libreyolo
