#include "models/model_name.h"

#include "core/error.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <filesystem>

namespace libreyolo::models {

namespace {

struct Family {
  std::string_view name;
  std::string_view weights_prefix;  // LibreYOLO's naming rule: Libre<FAMILY><size>.pt
  std::string_view sizes;
};

constexpr std::array<Family, 2> kFamilies{{
    {"yolo9", "LibreYOLO9", "tsmc"},
    {"yolox", "LibreYOLOX", "ntsmlx"},
}};

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

bool ends_with_weights_extension(std::string_view name) {
  const std::string lowered = lower(name);
  return lowered.ends_with(".pt") || lowered.ends_with(".pth") || lowered.ends_with(".safetensors");
}

std::string join_sizes(std::string_view sizes, std::string_view separator) {
  std::string text;
  for (const char size : sizes) {
    if (!text.empty()) text += separator;
    text += size;
  }
  return text;
}

std::string known_names() {
  std::string text;
  for (const auto& family : kFamilies) {
    text += fmt::format("{}{}-{}", text.empty() ? "" : ", ", family.name, join_sizes(family.sizes, "/"));
  }
  return text;
}

}  // namespace

std::vector<std::string> model_sizes(std::string_view family) {
  std::vector<std::string> sizes;
  for (const auto& entry : kFamilies) {
    if (entry.name != family) continue;
    for (const char size : entry.sizes) sizes.emplace_back(1, size);
  }
  return sizes;
}

std::string ModelName::weights_name() const {
  for (const auto& entry : kFamilies) {
    if (entry.name == family) return fmt::format("{}{}.pt", entry.weights_prefix, size);
  }
  return {};
}

ModelName parse_model_name(std::string_view name) {
  if (name.empty()) throw ModelError("model= is empty: give a model name such as yolo9-t or a checkpoint path");

  if (ends_with_weights_extension(name)) {
    ModelName result;
    result.is_file = true;
    const std::string stem = std::filesystem::path(name).stem().string();
    for (const auto& family : kFamilies) {
      if (stem.size() == family.weights_prefix.size() + 1 && stem.starts_with(family.weights_prefix) &&
          family.sizes.find(stem.back()) != std::string_view::npos) {
        result.family = std::string(family.name);
        result.size = std::string(1, stem.back());
      }
    }
    return result;
  }

  // `yolo9-t`, `yolo9t`, `YOLOX-s`: family, optional dash, one size letter.
  const std::string lowered = lower(name);
  for (const auto& family : kFamilies) {
    if (!lowered.starts_with(family.name)) continue;
    std::string_view rest = std::string_view(lowered).substr(family.name.size());
    if (!rest.empty() && rest.front() == '-') rest.remove_prefix(1);
    if (rest.size() == 1 && family.sizes.find(rest.front()) != std::string_view::npos) {
      return ModelName{std::string(family.name), std::string(rest), false};
    }
    throw ModelError(fmt::format("model={}: unknown size for {}; sizes are {}", name, family.name,
                                 join_sizes(family.sizes, ", ")));
  }
  throw ModelError(fmt::format("model={} is not a known model: use one of {}, or a .pt/.safetensors checkpoint path",
                               name, known_names()));
}

}  // namespace libreyolo::models
