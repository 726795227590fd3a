#include "profile/kernel_names.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <regex>
#include <utility>

namespace libreyolo::profile {

namespace {

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

// In ECMAScript, as in Python's re, \b is a word boundary and '_' a word character.
const std::array<std::pair<std::regex, const char*>, 5>& category_rules() {
  static const std::array<std::pair<std::regex, const char*>, 5> rules{{
      {std::regex(R"(bn_bw|bn_fw|batchnorm|batch_norm|layer_norm|group_norm|instance_norm|softmax|welford|\breduce|variance|rms_norm)"),
       "reduction / norm"},
      {std::regex(R"(nchwtonhwc|nhwctonchw)"), "layout / copy"},
      {std::regex(R"(gemm|conv|implicit|cutlass|cudnn|wgrad|dgrad|winograd)"), "gemm / conv"},
      {std::regex(R"(memcpy|memset|\bcopy|catarray|concat|contiguous|\bgather|\bscatter|\bpermute|\btranspose)"), "layout / copy"},
      {std::regex(R"(elementwise|vectorized|pointwise|activation|silu|relu|sigmoid|unary|binary|clamp|fill|arange)"), "elementwise"},
  }};
  return rules;
}

}  // namespace

std::string kernel_category(const std::string& name) {
  const std::string text = lower(name);
  for (const auto& [pattern, category] : category_rules()) {
    if (std::regex_search(text, pattern)) return category;
  }
  return "other";
}

bool is_tensor_core_kernel(const std::string& name) {
  static const std::regex pattern(R"(h884|h1688|i16832|i8816|s16816|s1688|hmma|imma|tensorop|wmma|16816|16832|884gemm|1688gemm)");
  return std::regex_search(lower(name), pattern);
}

std::string friendly_kernel_name(const std::string& name) {
  static const std::array<std::pair<const char*, const char*>, 14> names{{
      {"bn_bw", "cudnn batchnorm (bwd)"},
      {"bn_fw", "cudnn batchnorm (fwd)"},
      {"nchwtonhwc", "layout nchw->nhwc"},
      {"nhwctonchw", "layout nhwc->nchw"},
      {"implicitgemm", "cutlass conv (implicit gemm)"},
      {"implicit_convolve", "cudnn conv (implicit)"},
      {"wgrad", "conv weight grad"},
      {"dgrad", "conv data grad"},
      {"cgemm", "gemm"},
      {"sgemm", "gemm"},
      {"gemm", "gemm"},
      {"elementwise", "elementwise"},
      {"softmax", "softmax"},
      {"reduce", "reduction"},
  }};
  const std::string text = lower(name);
  if (text.find("vectorized_elementwise") != std::string::npos) return "elementwise";
  for (const auto& [needle, friendly] : names) {
    if (text.find(needle) != std::string::npos) return friendly;
  }
  if (text.find("cat") != std::string::npos) return "concat";
  return name.substr(0, 40);
}

}  // namespace libreyolo::profile
