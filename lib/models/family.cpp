#include "models/family.h"

#include "core/error.h"
#include "models/model_name.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <stdexcept>

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
  if (!config.family().empty()) return family(config.family());
  static const std::string fallback = parse_model_name(default_model()).family;
  return family(fallback);
}

std::string example_model() {
  const Family& first = *families().front();
  return fmt::format("{}-{}", first.name(), first.sizes().front());
}

std::span<const config::OptionSpec> option_table() {
  static const std::string model_help = [] {
    const config::OptionSpec* model = config::find_option(config::core_option_table(), "model");
    return fmt::format("{} (registered: {})", model->help, model_names());
  }();
  static const config::OptionTable table = [] {
    std::vector<config::OptionSpec> core(config::core_option_table().begin(), config::core_option_table().end());
    for (auto& spec : core) {
      if (spec.name != "model") continue;
      spec.default_value = default_model();
      spec.help = model_help;
    }
    std::vector<config::FamilyKeys> declared;
    for (const Family* f : families()) declared.push_back({f->name(), f->options()});
    return config::OptionTable(core, declared);
  }();
  return table.specs();
}

std::string command_help(config::Command command) {
  return config::format_command_help(option_table(), command, family_defaults_table());
}

std::string man_options() { return config::format_man_options(option_table(), config::command_all, family_defaults_table()); }

std::vector<config::OptionDefault> recipe_defaults(const Family& family, const std::string& size) {
  std::vector<config::OptionDefault> defaults;
  const auto table = option_table();
  for (const auto& key : family.options()) {
    const config::OptionSpec* merged = config::find_option(table, key.name);
    if (merged->default_value != key.default_value) defaults.push_back({key.name, key.default_value});
  }
  // the model's task is implied (task=classify for a classifier)
  if (family.task() != config::find_option(table, "task")->default_value) defaults.push_back({"task", family.task()});
  for (auto& entry : family.option_defaults(size)) defaults.push_back(entry);
  return defaults;
}

Decoded Family::decode(const std::vector<at::Tensor>&) const {
  throw std::logic_error(fmt::format("{} models have no boxes to decode (task={})", name(), task()));
}

std::vector<config::FamilyDefaults> family_defaults_table() {
  std::vector<config::FamilyDefaults> table;
  for (const Family* f : families()) {
    const auto common = recipe_defaults(*f, "");
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
