#include "models/family.h"

#include "core/error.h"
#include "models/model_name.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

namespace libreyolo::models {

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
    for (const auto& size : f->sizes()) {
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
