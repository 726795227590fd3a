#include "models/model_name.h"

#include "core/error.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <initializer_list>
#include <cctype>
#include <filesystem>

namespace libreyolo::models {

namespace {

struct Family {
  std::string_view name;
  std::string_view weights_prefix;  // LibreYOLO's naming rule: <prefix><size>.pt
  std::initializer_list<std::string_view> sizes;
};

const std::array<Family, 9> kFamilies{{
    {"yolo9", "LibreYOLO9", {"t", "s", "m", "c"}},
    {"yolo7", "LibreYOLO7", {"b"}},
    {"rtmdet", "LibreRTMDet", {"t", "s", "m", "l", "x"}},
    {"yolox", "LibreYOLOX", {"n", "t", "s", "m", "l", "x"}},
    {"yolov5", "LibreYOLOv5", {"n", "s", "m", "l", "x"}},
    {"rtdetrv4", "LibreRTDETRv4", {"s", "m", "l", "x"}},  // before rtdetr: names are matched by prefix
    {"rtdetr", "LibreRTDETR", {"r18", "r34", "r50", "r50m", "r101", "l", "x"}},
    {"dfine", "LibreDFINE", {"n", "s", "m", "l", "x"}},
    {"deim", "LibreDEIM", {"n", "s", "m", "l", "x"}},
}};

bool has_size(const Family& family, std::string_view size) {
  return std::find(family.sizes.begin(), family.sizes.end(), size) != family.sizes.end();
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

std::string join_sizes(std::initializer_list<std::string_view> sizes, std::string_view separator) {
  std::string text;
  for (const std::string_view size : sizes) {
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
    for (const std::string_view size : entry.sizes) sizes.emplace_back(size);
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
      if (stem.starts_with(family.weights_prefix) && has_size(family, std::string_view(stem).substr(family.weights_prefix.size()))) {
        result.family = std::string(family.name);
        result.size = stem.substr(family.weights_prefix.size());
      }
    }
    return result;
  }

  // `yolov5s.yaml`, as yolov5's --cfg and Ultralytics name a model to build from scratch: the named
  // model (we build the architectures we name, not custom yaml files).
  std::string lowered = lower(name);
  if (lowered.ends_with(".yaml") || lowered.ends_with(".yml")) {
    const std::string stem = lower(std::filesystem::path(name).stem().string());
    for (const auto& family : kFamilies) {
      if (!stem.starts_with(family.name)) continue;
      std::string_view rest = std::string_view(stem).substr(family.name.size());
      if (!rest.empty() && rest.front() == '-') rest.remove_prefix(1);
      if (has_size(family, rest)) return ModelName{std::string(family.name), std::string(rest), false};
    }
    throw ModelError(fmt::format("model={}: a model yaml is read by its name only (yolov5s.yaml builds yolov5s from "
                                 "scratch); custom architecture files are not supported: use one of {}",
                                 name, known_names()));
  }

  // `yolo9-t`, `yolo9t`, `YOLOX-s`, `rtdetr-r18`, `yolov5s`: family, optional dash, size.
  for (const auto& family : kFamilies) {
    if (!lowered.starts_with(family.name)) continue;
    std::string_view rest = std::string_view(lowered).substr(family.name.size());
    if (!rest.empty() && rest.front() == '-') rest.remove_prefix(1);
    if (has_size(family, rest)) {
      return ModelName{std::string(family.name), std::string(rest), false};
    }
    if (family.name == "yolov5" && rest.ends_with('u') && has_size(family, rest.substr(0, rest.size() - 1))) {
      throw ModelError(fmt::format("model={}: Ultralytics' YOLOv5u is an anchor-free model with YOLOv8's head, a different "
                                   "network; we train the original anchor-based YOLOv5: yolov5{}",
                                   name, rest.substr(0, rest.size() - 1)));
    }
    throw ModelError(fmt::format("model={}: unknown size for {}; sizes are {}", name, family.name,
                                 join_sizes(family.sizes, ", ")));
  }
  throw ModelError(fmt::format("model={} is not a known model: use one of {}, or a .pt/.safetensors checkpoint path",
                               name, known_names()));
}

}  // namespace libreyolo::models
