#include "core/option_value.h"

#include "core/error.h"
#include "core/text.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <vector>

namespace libreyolo::config {

namespace {

std::string lower(std::string_view text) { return ascii_lower(text); }

std::string_view trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  return text;
}

// YAML and shells leave quotes around strings now and then: 'abc' or "abc".
std::string_view strip_quotes(std::string_view text) {
  if (text.size() >= 2 && (text.front() == '\'' || text.front() == '"') && text.back() == text.front()) {
    return text.substr(1, text.size() - 2);
  }
  return text;
}

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  while (true) {
    const auto end = text.find(separator, start);
    parts.push_back(text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return parts;
}

bool parse_integer(std::string_view text, std::int64_t& out) {
  text = trim(text);
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  const auto* end = text.data() + text.size();
  const auto result = std::from_chars(text.data(), end, out);
  return !text.empty() && result.ec == std::errc() && result.ptr == end;
}

bool parse_real(std::string_view text, double& out) {
  text = trim(text);
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  const auto* end = text.data() + text.size();
  const auto result = std::from_chars(text.data(), end, out);
  return !text.empty() && result.ec == std::errc() && result.ptr == end && std::isfinite(out);
}

std::string format_bound(double bound) {
  if (std::abs(bound) >= 1e12) return bound < 0 ? "-inf" : "inf";
  return fmt::format("{}", bound);
}

[[noreturn]] void fail_type(const OptionSpec& spec, std::string_view text, std::string_view expected) {
  throw UsageError(fmt::format("'{}={}' is not valid: '{}' takes {} (e.g. '{}={}')", spec.name, text, spec.name,
                               expected, spec.name, spec.default_value == "none" ? "..." : spec.default_value));
}

void check_range(const OptionSpec& spec, std::string_view text, double value) {
  const bool below = spec.minimum && value < *spec.minimum;
  const bool above = spec.maximum && value > *spec.maximum;
  if (below || above) {
    throw UsageError(fmt::format("'{}={}' is out of range: '{}' takes values in [{}, {}]", spec.name, text,
                                 spec.name, format_bound(spec.minimum.value_or(-1e12)),
                                 format_bound(spec.maximum.value_or(1e12))));
  }
}

Value parse_choice(const OptionSpec& spec, std::string_view text) {
  std::string value = lower(text);
  for (const auto synonym : split(spec.synonyms, ' ')) {
    const auto equals = synonym.find('=');
    if (equals != std::string_view::npos && synonym.substr(0, equals) == value) {
      value = std::string(synonym.substr(equals + 1));
      break;
    }
  }
  for (const auto choice : split(spec.choices, ' ')) {  // case-insensitive; the value takes the choice's spelling
    if (lower(choice) == lower(value)) return std::string(choice);
  }
  std::string allowed;
  for (const auto choice : split(spec.choices, ' ')) allowed += fmt::format("{}{}", allowed.empty() ? "" : ", ", choice);
  throw UsageError(fmt::format("'{}={}' is not valid: '{}' takes one of {}", spec.name, text, spec.name, allowed));
}

Value parse_real_pair(const OptionSpec& spec, std::string_view text) {
  std::string_view inner = trim(text);
  if (inner.size() >= 2 && ((inner.front() == '(' && inner.back() == ')') || (inner.front() == '[' && inner.back() == ']'))) {
    inner = inner.substr(1, inner.size() - 2);
  }
  const auto parts = split(inner, ',');
  RealPair pair;
  if (parts.size() != 2 || !parse_real(parts[0], pair.first) || !parse_real(parts[1], pair.second)) {
    fail_type(spec, text, "a pair of numbers like (0.5,1.5)");
  }
  check_range(spec, text, pair.first);
  check_range(spec, text, pair.second);
  if (pair.first > pair.second) {
    throw UsageError(fmt::format("'{}={}' is not valid: the first number must not exceed the second", spec.name, text));
  }
  return pair;
}

Value parse_image_size(const OptionSpec& spec, std::string_view text) {
  std::string_view inner = trim(text);
  if (inner.size() >= 2 && ((inner.front() == '(' && inner.back() == ')') || (inner.front() == '[' && inner.back() == ']'))) {
    inner = inner.substr(1, inner.size() - 2);
  }
  const char separator = inner.find('x') != std::string_view::npos ? 'x' : ',';
  const auto parts = split(inner, separator);
  std::int64_t height = 0;
  std::int64_t width = 0;
  bool ok = false;
  if (parts.size() == 1) {
    ok = parse_integer(parts[0], height);
    width = height;
  } else if (parts.size() == 2) {
    ok = parse_integer(parts[0], height) && parse_integer(parts[1], width);
  }
  if (!ok) fail_type(spec, text, "an integer size like 640 or HxW like 480x640");
  check_range(spec, text, static_cast<double>(height));
  check_range(spec, text, static_cast<double>(width));
  return ImageSize{static_cast<int>(height), static_cast<int>(width)};
}

}  // namespace

bool parse_bool_literal(std::string_view text, bool& out) {
  const std::string value = lower(trim(text));
  if (value == "true" || value == "1" || value == "yes" || value == "on") {
    out = true;
    return true;
  }
  if (value == "false" || value == "0" || value == "no" || value == "off") {
    out = false;
    return true;
  }
  return false;
}

Value parse_value(const OptionSpec& spec, std::string_view raw) {
  const std::string_view text = strip_quotes(trim(raw));
  if (spec.nullable && (lower(text) == "none" || lower(text) == "null" || text.empty())) return std::monostate{};

  switch (spec.type) {
    case ValueType::boolean: {
      bool value = false;
      if (!parse_bool_literal(text, value)) fail_type(spec, text, "true or false (or 1/0)");
      return value;
    }
    case ValueType::integer: {
      std::int64_t value = 0;
      if (!parse_integer(text, value)) {
        fail_type(spec, text, spec.nullable ? "an integer or none" : "an integer");
      }
      check_range(spec, text, static_cast<double>(value));
      return value;
    }
    case ValueType::real: {
      double value = 0;
      if (!parse_real(text, value)) fail_type(spec, text, spec.nullable ? "a number or none" : "a number");
      check_range(spec, text, value);
      return value;
    }
    case ValueType::text:
      return std::string(text);
    case ValueType::choice:
      return parse_choice(spec, text);
    case ValueType::real_pair:
      return parse_real_pair(spec, text);
    case ValueType::image_size:
      return parse_image_size(spec, text);
    case ValueType::flag_or_path: {
      bool flag = false;
      if (text.empty()) return std::string("false");
      if (parse_bool_literal(text, flag)) return std::string(flag ? "true" : "false");
      return std::string(text);
    }
  }
  fail_type(spec, text, "a value");
}

std::string format_value(const Value& value) {
  struct Formatter {
    std::string operator()(std::monostate) const { return "none"; }
    std::string operator()(bool v) const { return v ? "true" : "false"; }
    std::string operator()(std::int64_t v) const { return fmt::format("{}", v); }
    std::string operator()(double v) const {
      // Shortest round-trip form, but always recognisable as a float.
      std::string text = fmt::format("{}", v);
      if (text.find_first_of(".eE") == std::string::npos) text += ".0";
      return text;
    }
    std::string operator()(const std::string& v) const { return v; }
    std::string operator()(const RealPair& v) const { return fmt::format("({},{})", (*this)(v.first), (*this)(v.second)); }
    std::string operator()(const ImageSize& v) const {
      return v.height == v.width ? fmt::format("{}", v.height) : fmt::format("{}x{}", v.height, v.width);
    }
  };
  return std::visit(Formatter{}, value);
}

}  // namespace libreyolo::config
