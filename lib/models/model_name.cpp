#include "models/model_name.h"

#include "core/error.h"
#include "models/family.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <filesystem>

namespace libreyolo::models {

namespace {

// The registered families, longest name first: a name is read by its longest family prefix
// ("rtdetrv4-s" is RT-DETRv4's, not RT-DETR's), whatever the registration order.
const std::vector<const Family*>& longest_name_first() {
  static const std::vector<const Family*> sorted = [] {
    std::vector<const Family*> all(families().begin(), families().end());
    std::stable_sort(all.begin(), all.end(), [](const Family* a, const Family* b) { return a->name().size() > b->name().size(); });
    return all;
  }();
  return sorted;
}

bool has_size(const Family& family, std::string_view size) {
  const auto sizes = family.sizes();
  return std::find(sizes.begin(), sizes.end(), size) != sizes.end();
}

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

bool ends_with_weights_extension(std::string_view name) {
  const std::string lowered = lower(name);
  return lowered.ends_with(".pt") || lowered.ends_with(".pth") || lowered.ends_with(".safetensors");
}

std::string join_sizes(const std::vector<std::string>& sizes, std::string_view separator) {
  std::string text;
  for (const std::string_view size : sizes) {
    if (!text.empty()) text += separator;
    text += size;
  }
  return text;
}

std::string known_names() {
  std::string text;
  for (const Family* family : families()) {
    text += fmt::format("{}{}-{}", text.empty() ? "" : ", ", family->name(), join_sizes(family->sizes(), "/"));
  }
  return text;
}

}  // namespace

std::string model_names() { return known_names(); }

std::string ModelName::weights_name() const {
  for (const Family* entry : families()) {
    if (entry->name() == family) return fmt::format("{}{}{}.pt", entry->weights_prefix(), size, entry->weights_suffix());
  }
  return {};
}

ModelName parse_model_name(std::string_view name) {
  if (name.empty()) throw ModelError("model= is empty: give a model name such as yolo9-t or a checkpoint path");

  if (ends_with_weights_extension(name)) {
    ModelName result;
    result.is_file = true;
    const std::string stem = std::filesystem::path(name).stem().string();
    for (const Family* family : longest_name_first()) {
      const std::string_view prefix = family->weights_prefix(), suffix = family->weights_suffix();
      if (!stem.starts_with(prefix) || !std::string_view(stem).substr(prefix.size()).ends_with(suffix)) continue;
      const std::string size = stem.substr(prefix.size(), stem.size() - prefix.size() - suffix.size());
      if (has_size(*family, size)) {
        result.family = std::string(family->name());
        result.size = size;
        break;
      }
    }
    return result;
  }

  // `yolov5s.yaml`, as yolov5's --cfg and Ultralytics name a model to build from scratch: the named
  // model (we build the architectures we name, not custom yaml files).
  std::string lowered = lower(name);
  if (lowered.ends_with(".yaml") || lowered.ends_with(".yml")) {
    const std::string stem = lower(std::filesystem::path(name).stem().string());
    for (const Family* family : longest_name_first()) {
      if (!stem.starts_with(family->name())) continue;
      std::string_view rest = std::string_view(stem).substr(family->name().size());
      if (!rest.empty() && rest.front() == '-') rest.remove_prefix(1);
      if (has_size(*family, rest)) return ModelName{std::string(family->name()), std::string(rest), false};
    }
    throw ModelError(fmt::format("model={}: a model yaml is read by its name only (yolov5s.yaml builds yolov5s from "
                                 "scratch); custom architecture files are not supported: use one of {}",
                                 name, known_names()));
  }

  // `yolo9-t`, `yolo9t`, `YOLOX-s`, `rtdetr-r18`, `yolov5s`: family, optional dash, size.
  for (const Family* family : longest_name_first()) {
    if (!lowered.starts_with(family->name())) continue;
    std::string_view rest = std::string_view(lowered).substr(family->name().size());
    if (!rest.empty() && rest.front() == '-') rest.remove_prefix(1);
    if (has_size(*family, rest)) {
      return ModelName{std::string(family->name()), std::string(rest), false};
    }
    if (family->name() == "yolov5" && rest.ends_with('u') && has_size(*family, rest.substr(0, rest.size() - 1))) {
      throw ModelError(fmt::format("model={}: Ultralytics' YOLOv5u is an anchor-free model with YOLOv8's head, a different "
                                   "network; we train the original anchor-based YOLOv5: yolov5{}",
                                   name, rest.substr(0, rest.size() - 1)));
    }
    throw ModelError(fmt::format("model={}: unknown size for {}; sizes are {}", name, family->name(),
                                 join_sizes(family->sizes(), ", ")));
  }
  throw ModelError(fmt::format("model={} is not a known model: use one of {}, or a .pt/.safetensors checkpoint path",
                               name, known_names()));
}

}  // namespace libreyolo::models
