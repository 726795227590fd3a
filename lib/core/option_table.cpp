#include "core/option_table.h"

#include "core/option_keys.h"

#include <array>
#include <vector>

namespace libreyolo::config {

namespace {

constexpr auto kAliases = std::to_array<Alias>({
    {"lrf", "min_lr_ratio"},
    {"close_mosaic", "no_aug_epochs"},
    {"fliplr", "flip_prob"},
    {"hsv_h", "hsv_hue"},
    {"hsv_s", "hsv_saturation"},
    {"hsv_v", "hsv_value"},
    {"mosaic_prob", "mosaic"},
    {"mixup_prob", "mixup"},
    {"plots", "save_plots"},
    {"scale", "mosaic_scale", AliasKind::symmetric_range},
    {"cos_lr", "scheduler", AliasKind::bool_to_choice, "cos"},
});

}  // namespace

// Every key, in the table's order (its parts: core/option_keys.h).
std::span<const OptionSpec> option_table() {
  static const std::vector<OptionSpec> table = [] {
    std::vector<OptionSpec> all;
    for (const auto part : {keys::run_keys(), keys::recipe_keys(), keys::output_keys()}) all.insert(all.end(), part.begin(), part.end());
    return all;
  }();
  return table;
}
std::span<const Alias> aliases() { return kAliases; }

const OptionSpec* find_option(std::string_view name) {
  for (const auto& spec : option_table()) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

const Alias* find_alias(std::string_view name) {
  for (const auto& alias : kAliases) {
    if (alias.alias == name) return &alias;
  }
  return nullptr;
}

std::string_view command_name(Command command) {
  switch (command) {
    case command_train: return "train";
    case command_val: return "val";
    case command_predict: return "predict";
    case command_profile: return "profile";
    case command_data: return "data";
    case command_info: return "info";
  }
  return "?";
}

std::string_view type_name(ValueType type) {
  switch (type) {
    case ValueType::boolean: return "bool";
    case ValueType::integer: return "int";
    case ValueType::real: return "float";
    case ValueType::text: return "str";
    case ValueType::choice: return "choice";
    case ValueType::real_pair: return "(float,float)";
    case ValueType::image_size: return "int|HxW";
    case ValueType::flag_or_path: return "bool|path";
  }
  return "?";
}

}  // namespace libreyolo::config
