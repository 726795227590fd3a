#include "core/option_table.h"

#include "core/option_keys.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <stdexcept>
#include <utility>
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

// The core keys, in the table's order (its parts: core/option_keys.h).
std::span<const OptionSpec> core_option_table() {
  static const std::vector<OptionSpec> table = [] {
    std::vector<OptionSpec> all;
    for (const auto part : {keys::run_keys(), keys::recipe_keys(), keys::output_keys()}) all.insert(all.end(), part.begin(), part.end());
    return all;
  }();
  return table;
}
std::span<const Alias> aliases() { return kAliases; }

std::string_view OptionTable::keep(std::string text) { return text_.emplace_back(std::move(text)); }

OptionTable::OptionTable(std::span<const OptionSpec> core, std::span<const FamilyKeys> families) : specs_(core.begin(), core.end()) {
  struct Owners {
    std::string names;  // "yolo9 yolov5"
    std::vector<std::pair<std::string_view, std::string_view>> helps;  // (family, its help), one per family
  };
  std::vector<Owners> owners(specs_.size());
  for (const auto& family : families) {
    for (const OptionSpec& key : family.keys) {
      std::size_t at = specs_.size();
      for (std::size_t i = 0; i < specs_.size(); ++i) {
        if (specs_[i].name == key.name) at = i;
      }
      if (at == specs_.size()) {
        std::size_t after = specs_.size();
        for (std::size_t i = 0; i < specs_.size(); ++i) {
          if (specs_[i].group == key.group) after = i + 1;
        }
        specs_.insert(specs_.begin() + static_cast<std::ptrdiff_t>(after), key);
        owners.insert(owners.begin() + static_cast<std::ptrdiff_t>(after), Owners{});
        at = after;
      } else {
        const OptionSpec& held = specs_[at];
        if (owners[at].names.empty()) {
          throw std::logic_error(fmt::format("family {} declares key '{}', which the core table holds", family.family, key.name));
        }
        if (held.type != key.type || held.minimum != key.minimum ||
            held.maximum != key.maximum || held.choices != key.choices || held.commands != key.commands ||
            held.support != key.support || held.nullable != key.nullable || held.group != key.group) {
          throw std::logic_error(fmt::format("families {} and {} declare key '{}' differently: they must agree on all but "
                                             "its help and default",
                                             owners[at].names, family.family, key.name));
        }
      }
      Owners& owner = owners[at];
      owner.names += fmt::format("{}{}", owner.names.empty() ? "" : " ", family.family);
      owner.helps.emplace_back(family.family, key.help);
    }
  }
  for (std::size_t i = 0; i < specs_.size(); ++i) {
    if (owners[i].names.empty()) continue;
    specs_[i].families = keep(owners[i].names);
    // One help, or several families saying the same: as written; else each family's, named.
    const auto& helps = owners[i].helps;
    if (std::all_of(helps.begin(), helps.end(), [&](const auto& h) { return h.second == helps.front().second; })) continue;
    std::string help;
    for (const auto& [family, text] : helps) help += fmt::format("{}{}: {}", help.empty() ? "" : "; ", family, text);
    specs_[i].help = keep(std::move(help));
  }
}

const OptionSpec* find_option(std::span<const OptionSpec> table, std::string_view name) {
  for (const auto& spec : table) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

bool applies_to(const OptionSpec& spec, std::string_view family) {
  if (spec.families.empty() || family.empty()) return true;
  std::string_view rest = spec.families;
  while (!rest.empty()) {
    const auto space = rest.find(' ');
    if (rest.substr(0, space) == family) return true;
    rest = space == std::string_view::npos ? std::string_view{} : rest.substr(space + 1);
  }
  return false;
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
