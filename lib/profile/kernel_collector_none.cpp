// Builds without CUPTI: there is nothing to collect GPU activity with.
#include "profile/kernel_collector.h"

namespace libreyolo::profile {

std::unique_ptr<KernelCollector> start_kernel_collector(int, std::string& why_not) {
  why_not = "this build of libreyolo has no CUPTI (configured with -Dcupti=disabled or without CUDA)";
  return nullptr;
}

}  // namespace libreyolo::profile
