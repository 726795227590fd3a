// What a GPU kernel is, from its name alone: a category for the kernel mix, whether it runs on
// Tensor Cores, and a short friendly name for reports (LibreYOLO's rules, first match wins).
#pragma once

#include <string>

namespace libreyolo::profile {

// "reduction / norm", "layout / copy", "gemm / conv", "elementwise" or "other".
std::string kernel_category(const std::string& name);
bool is_tensor_core_kernel(const std::string& name);
std::string friendly_kernel_name(const std::string& name);

}  // namespace libreyolo::profile
