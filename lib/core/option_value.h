// Typed values of the option table: parsing what a user typed (with an error that names the
// key, the value and what is allowed) and printing a value back in the same syntax.
#pragma once

#include "core/option_table.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace libreyolo::config {

struct ImageSize {
  int height = 0;
  int width = 0;
  bool operator==(const ImageSize&) const = default;
};

using RealPair = std::pair<double, double>;

// std::monostate is `none`. choice and flag_or_path values are stored as their canonical text
// (flag_or_path: "false", "true" or a path).
using Value = std::variant<std::monostate, bool, std::int64_t, double, std::string, RealPair, ImageSize>;

// Throws UsageError naming spec.name when `text` is not a valid value for the key.
Value parse_value(const OptionSpec& spec, std::string_view text);

// The value as a user would type it (640, 480x640, (0.1,2.0), true, none).
std::string format_value(const Value& value);

bool parse_bool_literal(std::string_view text, bool& out);

}  // namespace libreyolo::config
