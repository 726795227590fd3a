#include "core/system_info.h"

#include "build_config.h"
#include "core/version.h"

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <opencv2/core/version.hpp>
#include <torch/version.h>

#include <dlfcn.h>
#include <sched.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <thread>

namespace libreyolo {

int usable_cpus() {
  int cpus = static_cast<int>(std::thread::hardware_concurrency());
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (::sched_getaffinity(0, sizeof mask, &mask) == 0) cpus = CPU_COUNT(&mask);
  std::ifstream quota_file("/sys/fs/cgroup/cpu.max");  // "max 100000" or "<quota> <period>"
  std::string quota;
  double period = 0;
  if (quota_file >> quota >> period && quota != "max" && period > 0) {
    const double share = std::atof(quota.c_str()) / period;
    if (share > 0) cpus = std::min(cpus, static_cast<int>(std::ceil(share)));
  }
  return std::max(cpus, 1);
}

std::string malloc_name() {
  using VersionFn = const char* (*)(int*, int*, const char**);
  if (auto* version = reinterpret_cast<VersionFn>(::dlsym(RTLD_DEFAULT, "tc_version"))) {
    int major = 0, minor = 0;
    const char* patch = nullptr;
    version(&major, &minor, &patch);
    return fmt::format("tcmalloc {}.{}{}", major, minor, patch != nullptr ? patch : "");
  }
  if (::dlsym(RTLD_DEFAULT, "mallctl") != nullptr) return "jemalloc";  // preloaded (LD_PRELOAD)
  return "glibc malloc";
}

void choose_intra_op_threads() {
  if (std::getenv("OMP_NUM_THREADS") != nullptr) return;
  const int usable = usable_cpus();
  if (at::get_num_threads() > usable) at::set_num_threads(usable);
}

SystemInfo collect_system_info() {
  SystemInfo info;
  info.libreyolo_version = LIBREYOLO_VERSION;
  info.git_revision = git_revision();
  info.torch_version = TORCH_VERSION;
  info.opencv_version = CV_VERSION;
  info.cpu_threads = usable_cpus();
  info.torch_threads = at::get_num_threads();
  info.allocator = malloc_name();
  info.cupti_compiled = LIBREYOLO_HAVE_CUPTI;
  info.dist_backends = {"gloo"};
  if (LIBREYOLO_HAVE_NCCL) info.dist_backends.emplace_back("nccl");
  info.cuda = cuda::query_cuda_info();
  return info;
}

std::string format_system_info(const SystemInfo& info) {
  const auto or_none = [](const std::string& text) { return text.empty() ? std::string("not available") : text; };
  std::string text;
  text += fmt::format("libreyolo   {} (git {})\n", info.libreyolo_version, info.git_revision);
  text += fmt::format("LibTorch    {}\n", info.torch_version);
  if (info.cuda.compiled) {
    text += fmt::format("CUDA        {} (runtime LibTorch was built with)\n", info.cuda.runtime_version);
    text += fmt::format("cuDNN       {}\n", or_none(info.cuda.cudnn_version));
    text += fmt::format("NCCL        {}\n", or_none(info.cuda.nccl_version));
  } else {
    text += "CUDA        not compiled in (built with -Dcuda=disabled or a CPU-only LibTorch)\n";
  }
  text += fmt::format("CUPTI       {}\n", info.cupti_compiled ? fmt::format("compiled in (API {})", or_none(info.cuda.cupti_version))
                                                              : std::string("not compiled in"));
  text += fmt::format("c10d        {} (data-parallel backends)\n", fmt::join(info.dist_backends, ", "));
  if (info.cuda.devices.empty()) {
    text += fmt::format("GPUs        0 ({})\n", info.cuda.device_error);
  } else {
    text += fmt::format("GPUs        {}\n", info.cuda.devices.size());
    for (const auto& device : info.cuda.devices) {
      text += fmt::format("  cuda:{}    {} ({:.1f} GiB, sm_{}{})\n", device.index, device.name,
                          static_cast<double>(device.total_memory_bytes) / (1u << 30), device.compute_major,
                          device.compute_minor);
    }
  }
  text += fmt::format("CPU threads {} (LibTorch uses {})\n", info.cpu_threads, info.torch_threads);
  text += fmt::format("OpenCV      {}\n", info.opencv_version);
  text += fmt::format("malloc      {}{}\n", info.allocator,
                      info.allocator != "glibc malloc" ? "" : " (large tensors cost page faults: build with tcmalloc)");
  return text;
}

nlohmann::json system_info_json(const SystemInfo& info) {
  nlohmann::json devices = nlohmann::json::array();
  for (const auto& device : info.cuda.devices) {
    devices.push_back({{"index", device.index},
                       {"name", device.name},
                       {"total_memory_bytes", device.total_memory_bytes},
                       {"compute_capability", fmt::format("{}.{}", device.compute_major, device.compute_minor)}});
  }
  return {
      {"libreyolo_version", info.libreyolo_version},
      {"git_revision", info.git_revision},
      {"torch_version", info.torch_version},
      {"cuda_compiled", info.cuda.compiled},
      {"cuda_version", info.cuda.runtime_version},
      {"cudnn_version", info.cuda.cudnn_version},
      {"nccl_version", info.cuda.nccl_version},
      {"cupti_compiled", info.cupti_compiled},
      {"cupti_version", info.cuda.cupti_version},
      {"dist_backends", info.dist_backends},
      {"gpu_count", info.cuda.devices.size()},
      {"gpus", devices},
      {"gpu_note", info.cuda.device_error},
      {"cpu_threads", info.cpu_threads},
      {"torch_threads", info.torch_threads},
      {"opencv_version", info.opencv_version},
      {"allocator", info.allocator},
  };
}

}  // namespace libreyolo
