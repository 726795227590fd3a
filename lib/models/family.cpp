#include "models/family.h"

#include "core/error.h"
#include "models/model_name.h"
#include "models/detr/dfine_family.h"
#include "models/detr/rtdetr_family.h"
#include "models/yolo9/family.h"
#include "models/yolox/family.h"
#include "models/yolov5/family.h"
#include "models/yolo7/family.h"
#include "models/rtmdet/family.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <array>

namespace libreyolo::models {

// The registry: one line per family.
std::span<const Family* const> families() {
  // RT-DETRv4 before D-FINE: its released files hold D-FINE's keys and its own (family_from_keys)
  static const std::array<const Family*, 9> all{&yolo9::family(),         &yolox::family(),       &yolov5::family(),
                                                &yolo7::family(),         &rtmdet::family(),      &detr::rtdetr_family(),   &detr::rtdetrv4_family(), &detr::dfine_family(),
                                                &detr::deim_family()};
  return all;
}

const Family& family(std::string_view name) {
  if (name.empty()) {
    throw ModelError("this model name does not say its family and size: use a name like yolo9-t or yolox-s, or a "
                     "checkpoint whose metadata names them");
  }
  std::string known;
  for (const Family* f : families()) {
    if (f->name() == name) return *f;
    known += fmt::format("{}{}", known.empty() ? "" : ", ", f->name());
  }
  throw ModelError(fmt::format("unknown model family '{}' (known: {})", name, known));
}

const Family& family_of(const config::Config& config) {
  return family(config.family().empty() ? std::string_view("yolox") : std::string_view(config.family()));
}

std::vector<config::FamilyDefaults> family_defaults_table() {
  std::vector<config::FamilyDefaults> table;
  for (const Family* f : families()) {
    const auto common = f->option_defaults("");
    table.push_back({std::string(f->name()), common});
    for (const auto& size : model_sizes(f->name())) {
      config::FamilyDefaults own{fmt::format("{}-{}", f->name(), size), {}};
      for (const auto& entry : f->option_defaults(size)) {
        std::string_view before;
        for (const auto& base : common) {
          if (base.key == entry.key) before = base.value;
        }
        if (before != entry.value) own.defaults.push_back(entry);
      }
      if (!own.defaults.empty()) table.push_back(std::move(own));
    }
  }
  return table;
}

}  // namespace libreyolo::models
