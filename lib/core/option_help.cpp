#include "core/option_help.h"

#include <fmt/format.h>

#include <cmath>

#include <vector>

namespace libreyolo::config {

namespace {

std::vector<std::string_view> groups_of(std::span<const OptionSpec> table, unsigned command) {
  std::vector<std::string_view> groups;
  for (const auto& spec : table) {
    if (!(spec.commands & command)) continue;
    bool seen = false;
    for (const auto group : groups) seen = seen || group == spec.group;
    if (!seen) groups.push_back(spec.group);
  }
  return groups;
}

std::string allowed_values(const OptionSpec& spec) {
  std::string text(type_name(spec.type));
  if (spec.type == ValueType::choice) {
    text = std::string(spec.choices);
    for (char& c : text) {
      if (c == ' ') c = '|';
    }
  }
  if (spec.minimum || spec.maximum) {
    const auto bound = [](std::optional<double> value, bool lower) {
      if (!value || std::abs(*value) >= 1e12) return std::string(lower ? "-inf" : "inf");
      return fmt::format("{}", *value);
    };
    text += fmt::format(" in [{}, {}]", bound(spec.minimum, true), bound(spec.maximum, false));
  }
  if (spec.nullable) text += " or none";
  return text;
}

std::string troff_escape(std::string_view text) {
  std::string out;
  for (const char c : text) {
    if (c == '\\') {
      out += "\\e";
    } else if (c == '-') {
      out += "\\-";
    } else {
      out += c;
    }
  }
  return out;
}

std::string aliases_of(std::string_view key) {
  std::string text;
  for (const auto& alias : aliases()) {
    if (alias.key == key) text += fmt::format("{}{}", text.empty() ? "" : ", ", alias.alias);
  }
  return text;
}

// What happens to a key the program does not act on, in words.
std::string support_note(const OptionSpec& spec) {
  switch (spec.support) {
    case Support::logged: return fmt::format("Not acted on: {}; setting it logs one line and the run goes on.", spec.why);
    case Support::refused: return fmt::format("Not supported: {}; any value but the default is refused (exit 2).", spec.why);
    default: return {};
  }
}

// "yolo9: 0.937, yolox: 0.9" for a key the families set ("" when none does).
std::string family_values(std::string_view key, std::span<const FamilyDefaults> families) {
  std::string text;
  for (const auto& family : families) {
    std::string_view value;
    for (const auto& entry : family.defaults) {
      if (entry.key == key) value = entry.value;
    }
    if (!value.empty()) text += fmt::format("{}{}: {}", text.empty() ? "" : ", ", family.label, value);
  }
  return text;
}

// "yolo9, yolo5" for a family's own key ("" for a core key).
std::string owners_of(const OptionSpec& spec) {
  std::string text(spec.families);
  for (std::size_t at = text.find(' '); at != std::string::npos; at = text.find(' ', at + 2)) text.replace(at, 1, ", ");
  return text;
}

}  // namespace

std::string format_command_help(std::span<const OptionSpec> table, Command command, std::span<const FamilyDefaults> families) {
  std::string text = fmt::format(
      "usage: libreyolo {} key=value ...   (also --key value, --key for true, --no-key for false)\n",
      command_name(command));
  for (const auto group : groups_of(table, command)) {
    text += fmt::format("\n{}:\n", group);
    for (const auto& spec : table) {
      if (!(spec.commands & command) || spec.group != group) continue;
      const std::string key = fmt::format("{}={}", spec.name, spec.default_value);
      text += fmt::format("  {:<28} {}  [{}]\n", key, spec.help, allowed_values(spec));
      const std::string alias = aliases_of(spec.name);
      if (!alias.empty()) text += fmt::format("  {:<28} (Ultralytics spelling: {})\n", "", alias);
      if (!spec.families.empty()) text += fmt::format("  {:<28} families: {} (the others ignore it, with a warning)\n", "", owners_of(spec));
      if (const std::string note = support_note(spec); !note.empty()) text += fmt::format("  {:<28} {}\n", "", note);
      if (const std::string values = family_values(spec.name, families); !values.empty()) {
        text += fmt::format("  {:<28} family defaults: {}\n", "", values);
      }
    }
  }
  text += "\nA model family's defaults (\"family defaults\" above) replace the table's for keys you do not set; "
          "`libreyolo cfg model=...` shows the resolved values.\n";
  return text;
}

std::string format_man_options(std::span<const OptionSpec> table, unsigned command, std::span<const FamilyDefaults> families) {
  std::string text;
  for (const auto group : groups_of(table, command)) {
    text += fmt::format(".SS {}\n", troff_escape(group));
    for (const auto& spec : table) {
      if (!(spec.commands & command) || spec.group != group) continue;
      text += fmt::format(".TP\n.B {}={}\n{} [{}]\n", troff_escape(spec.name), troff_escape(spec.default_value),
                          troff_escape(spec.help), troff_escape(allowed_values(spec)));
      const std::string alias = aliases_of(spec.name);
      if (!alias.empty()) text += fmt::format("Also accepted: {}.\n", troff_escape(alias));
      if (!spec.families.empty()) text += fmt::format("Families: {} (the others ignore it, with a warning).\n", troff_escape(owners_of(spec)));
      if (const std::string note = support_note(spec); !note.empty()) text += troff_escape(note) + "\n";
      if (const std::string values = family_values(spec.name, families); !values.empty()) {
        text += fmt::format("Family defaults: {}.\n", troff_escape(values));
      }
      if (spec.commands != command) {
        std::string owners;
        for (const Command owner : {command_train, command_val, command_predict, command_profile, command_data, command_info}) {
          if (spec.commands & owner) owners += fmt::format("{}{}", owners.empty() ? "" : ", ", command_name(owner));
        }
        text += fmt::format("Commands: {}.\n", owners);
      }
    }
  }
  return text;
}

}  // namespace libreyolo::config
