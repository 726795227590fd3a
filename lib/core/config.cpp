#include "core/config.h"

#include "core/close_matches.h"
#include "core/error.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <optional>
#include <stdexcept>

namespace libreyolo::config {

namespace {

std::string normalise_key(std::string_view key) {
  std::string out(key);
  for (char& c : out) {
    if (c == '-') c = '_';
  }
  return out;
}

bool looks_like_key(std::string_view key) {
  if (key.empty() || !(std::isalpha(static_cast<unsigned char>(key[0])) || key[0] == '_')) return false;
  for (const char c : key) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-')) return false;
  }
  return true;
}

// `scale=0.5` -> `(0.5,1.5)`; `cos_lr=true` -> `cos`; a plain rename keeps the text.
std::optional<std::string> translate_alias_value(const Alias& alias, std::string_view text) {
  switch (alias.kind) {
    case AliasKind::rename:
      return std::string(text);
    case AliasKind::symmetric_range: {
      double gain = 0;
      try {
        std::size_t used = 0;
        gain = std::stod(std::string(text), &used);
        if (used != text.size()) throw std::invalid_argument("trailing");
      } catch (const std::exception&) {
        throw UsageError(fmt::format("'{}={}' is not valid: '{}' takes a number like 0.5", alias.alias, text, alias.alias));
      }
      if (gain < 0 || gain >= 1) {
        throw UsageError(fmt::format("'{}={}' is out of range: '{}' takes values in [0, 1)", alias.alias, text, alias.alias));
      }
      return fmt::format("({},{})", 1.0 - gain, 1.0 + gain);
    }
    case AliasKind::bool_to_choice: {
      bool flag = false;
      if (!parse_bool_literal(text, flag)) {
        throw UsageError(fmt::format("'{}={}' is not valid: '{}' takes true or false", alias.alias, text, alias.alias));
      }
      if (!flag) return std::nullopt;  // cos_lr=false leaves the scheduler alone
      return std::string(alias.value_when_true);
    }
  }
  return std::string(text);
}

std::vector<std::string_view> keys_for(std::span<const OptionSpec> table, Command command) {
  std::vector<std::string_view> keys;
  for (const auto& spec : table) {
    if (spec.commands & command) keys.push_back(spec.name);
  }
  for (const auto& alias : aliases()) {
    const OptionSpec* spec = find_option(table, alias.key);
    if (spec != nullptr && (spec->commands & command)) keys.push_back(alias.alias);
  }
  return keys;
}

[[noreturn]] void fail_unknown_key(std::span<const OptionSpec> table, Command command, std::string_view key, std::string_view context) {
  const auto candidates = keys_for(table, command);
  const auto matches = close_matches(key, candidates);
  std::string message = fmt::format("{}'{}' is not a valid key for '{}'.", context, key, command_name(command));
  if (!matches.empty()) {
    std::vector<std::string> shown;
    for (const auto& match : matches) {
      const Alias* alias = find_alias(match);
      const OptionSpec* spec = find_option(table, alias != nullptr ? alias->key : std::string_view(match));
      shown.push_back(spec != nullptr && !spec->default_value.empty()
                          ? fmt::format("{}={}", match, alias != nullptr ? "..." : spec->default_value)
                          : std::string(match));
    }
    message += fmt::format(" Similar keys: {}.", fmt::join(shown, ", "));
  }
  message += fmt::format(" See 'libreyolo {} --help'.", command_name(command));
  throw UsageError(message);
}

// A YAML node as the text a user would type, so cfg files and the command line share parsing.
std::string yaml_to_text(const YAML::Node& node, const std::string& key, const std::string& path) {
  if (node.IsNull()) return "none";
  if (node.IsScalar()) return node.Scalar();
  if (node.IsSequence()) {
    std::string text = "(";
    for (std::size_t i = 0; i < node.size(); ++i) {
      if (!node[i].IsScalar()) break;
      text += (i ? "," : "") + node[i].Scalar();
    }
    return text + ")";
  }
  throw UsageError(fmt::format("cfg file '{}': key '{}' must be a single value or a list, not a mapping", path, key));
}

struct Token {
  std::string key;
  std::string text;
};

// Splits the command line into key/value pairs: `key=value`, `--key=value`, `--key value`,
// bare bool keys, `--key` / `--key false` for bools and `--no-key`.
std::vector<Token> tokenize(std::span<const OptionSpec> table, Command command, std::span<const std::string> arguments) {
  std::vector<Token> tokens;
  for (std::size_t i = 0; i < arguments.size(); ++i) {
    std::string_view argument = arguments[i];
    const bool dashed = argument.starts_with("--");
    if (dashed) argument.remove_prefix(2);
    const auto equals = argument.find('=');
    if (equals != std::string_view::npos) {
      const std::string_view key = argument.substr(0, equals);
      if (!looks_like_key(key)) {
        throw UsageError(fmt::format("cannot read argument '{}': expected key=value with a key such as epochs", arguments[i]));
      }
      tokens.push_back({normalise_key(key), std::string(argument.substr(equals + 1))});
      continue;
    }
    if (!looks_like_key(argument)) {
      throw UsageError(fmt::format("cannot read argument '{}': expected key=value or --key value", arguments[i]));
    }
    std::string key = normalise_key(argument);
    const Alias* alias = find_alias(key);
    const OptionSpec* spec = find_option(table, alias != nullptr ? alias->key : std::string_view(key));
    // `--no-amp`
    if (spec == nullptr && dashed && key.starts_with("no_")) {
      const OptionSpec* negated = find_option(table, std::string_view(key).substr(3));
      if (negated != nullptr && negated->type == ValueType::boolean) {
        tokens.push_back({key.substr(3), "false"});
        continue;
      }
    }
    const bool is_flag = spec != nullptr &&
                         (spec->type == ValueType::boolean || spec->type == ValueType::flag_or_path ||
                          (alias != nullptr && alias->kind == AliasKind::bool_to_choice));
    if (is_flag) {
      bool unused = false;
      if (dashed && i + 1 < arguments.size() && parse_bool_literal(arguments[i + 1], unused)) {
        tokens.push_back({key, arguments[++i]});
      } else {
        tokens.push_back({key, "true"});
      }
      continue;
    }
    if (spec != nullptr && dashed) {
      if (i + 1 >= arguments.size()) {
        throw UsageError(fmt::format("'--{}' is missing its value, i.e. try '--{} {}'", argument, argument,
                                     spec->default_value));
      }
      tokens.push_back({key, arguments[++i]});
      continue;
    }
    if (spec != nullptr) {
      throw UsageError(fmt::format("'{}' is a valid key but is missing an '=' sign to set its value, i.e. try '{}={}'",
                                   key, key, spec->default_value));
    }
    fail_unknown_key(table, command, key, "");
  }
  return tokens;
}

}  // namespace

std::string_view source_name(Source source) {
  switch (source) {
    case Source::table_default: return "default";
    case Source::family_default: return "family";
    case Source::command_default: return "command";
    case Source::cfg_file: return "cfg";
    case Source::command_line: return "cli";
  }
  return "?";
}

Config::Config(Command command, std::span<const OptionSpec> table) : command_(command), table_(table) {
  values_.reserve(table.size());
  sources_.assign(table.size(), Source::table_default);
  for (const auto& spec : table) values_.push_back(parse_value(spec, spec.default_value));
  if (command == command_val) set("project", "runs/val", Source::command_default);
  if (command == command_predict) set("project", "runs/predict", Source::command_default);
}

Config Config::from_arguments(Command command, std::span<const std::string> arguments, const ModelIdentifier& identify,
                              std::span<const OptionSpec> table) {
  const std::vector<Token> tokens = tokenize(table, command, arguments);
  Config config(command, table);
  // cfg= first, wherever it stands, so the command line overrides the file.
  for (const auto& token : tokens) {
    if (token.key == "cfg") config.apply_token(token.key, token.text, Source::command_line, "");
  }
  if (!config.get_text("cfg").empty()) config.load_cfg_file(config.get_text("cfg"));
  for (const auto& token : tokens) {
    if (token.key != "cfg") config.apply_token(token.key, token.text, Source::command_line, "");
  }
  config.apply_family_defaults(identify);
  config.refuse_unsupported();
  config.round_image_size();
  return config;
}

// As Ultralytics' check_imgsz: a size that is not a multiple of the largest stride (32) is
// rounded up, with a note.
void Config::round_image_size() {
  constexpr int stride = 32;
  const std::size_t index = index_of("imgsz");
  if (!(table_[index].commands & command_)) return;
  ImageSize size = get_image_size("imgsz");
  const auto up = [](int side) { return (side + stride - 1) / stride * stride; };
  if (size.height % stride == 0 && size.width % stride == 0) return;
  const std::string before = format_value(values_[index]);
  size = {up(size.height), up(size.width)};
  values_[index] = size;
  notes_.push_back(fmt::format("imgsz={} must be a multiple of the maximum stride {}: updated to {}", before, stride,
                               format_value(values_[index])));
}

bool Config::differs_from_default(std::string_view key) const {
  const std::size_t index = index_of(key);
  if (sources_[index] != Source::cfg_file && sources_[index] != Source::command_line) return false;
  const OptionSpec& spec = table_[index];
  // A cfg file (a run's train_config.yaml) repeats the family's values: those are no request.
  std::string_view fallback = spec.default_value;
  for (const auto& entry : family_defaults_) {
    if (sources_[index] == Source::cfg_file && entry.key == key) fallback = entry.value;
  }
  return values_[index] != parse_value(spec, fallback);
}

// Keys whose feature we do not have (Support::refused) take only their default: anything else
// is refused before any work starts, rather than run without it.
void Config::refuse_unsupported() const {
  for (const auto& spec : table_) {
    if (spec.support != Support::refused || !(spec.commands & command_) || !differs_from_default(spec.name)) continue;
    throw UsageError(fmt::format("{}={} is not supported: {}. Remove the key (default: {})", spec.name,
                                 format_value(value(spec.name)), spec.why, spec.default_value.empty() ? "empty" : spec.default_value));
  }
}

std::vector<const OptionSpec*> Config::logged_keys_set() const {
  std::vector<const OptionSpec*> out;
  for (const auto& spec : table_) {
    if (spec.support == Support::logged && (spec.commands & command_) && differs_from_default(spec.name)) out.push_back(&spec);
  }
  return out;
}

std::vector<const OptionSpec*> Config::keys_of_other_families() const {
  std::vector<const OptionSpec*> out;
  for (const auto& spec : table_) {
    if ((spec.commands & command_) && !applies_to(spec, family_) && differs_from_default(spec.name)) out.push_back(&spec);
  }
  return out;
}

void Config::apply_token(std::string_view raw_key, std::string_view text, Source source, std::string_view context) {
  std::string key(raw_key);
  std::string value(text);
  if (const Alias* alias = find_alias(key)) {
    const auto translated = translate_alias_value(*alias, text);
    notes_.push_back(fmt::format("'{}' is Ultralytics' name; using {}={}", alias->alias, alias->key,
                                 translated.value_or("(unchanged)")));
    if (!translated) return;
    key = std::string(alias->key);
    value = *translated;
  }
  const OptionSpec* spec = find_option(table_, key);
  if (spec == nullptr) fail_unknown_key(table_, command_, key, context);
  if (!(spec->commands & command_)) {
    std::vector<std::string_view> owners;
    for (const Command command : {command_train, command_val, command_predict, command_profile, command_data, command_info}) {
      if (spec->commands & command) owners.push_back(command_name(command));
    }
    throw UsageError(fmt::format("{}'{}' is not accepted by '{}' (it is a key of: {})", context, key,
                                 command_name(command_), fmt::join(owners, ", ")));
  }
  try {
    set(key, value, source);
  } catch (const UsageError& error) {
    throw UsageError(fmt::format("{}{}", context, error.what()));
  }
}

void Config::load_cfg_file(const std::string& path) {
  if (!std::filesystem::exists(path)) {
    throw UsageError(fmt::format("cfg={}: file not found; give a YAML file of key: value lines", path));
  }
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& error) {
    throw UsageError(fmt::format("cfg file '{}' is not valid YAML (line {}): {}", path, error.mark.line + 1, error.msg));
  }
  if (root.IsNull()) return;
  if (!root.IsMap()) throw UsageError(fmt::format("cfg file '{}' must be a mapping of key: value lines", path));
  const std::string context = fmt::format("in cfg file '{}': ", path);
  for (const auto& item : root) {
    const std::string key = normalise_key(item.first.as<std::string>());
    if (key == "cfg") continue;  // a written train_config.yaml names its own cfg; never recurse
    apply_token(key, yaml_to_text(item.second, key, path), Source::cfg_file, context);
  }
}

void Config::apply_family_defaults(const ModelIdentifier& identify) {
  // An unknown model name or a missing weights file throws ModelError (exit 4) here, before
  // any work starts; a checkpoint's family comes from its metadata.
  const ModelIdentity name = identify(get_text("model"));
  family_ = name.family;
  size_ = name.size;
  family_defaults_ = name.defaults;
  for (const auto& entry : family_defaults_) {
    const std::size_t index = index_of(entry.key);
    if (sources_[index] == Source::cfg_file || sources_[index] == Source::command_line) continue;
    values_[index] = parse_value(table_[index], entry.value);
    sources_[index] = Source::family_default;
  }
}

std::size_t Config::index_of(std::string_view key) const {
  for (std::size_t i = 0; i < table_.size(); ++i) {
    if (table_[i].name == key) return i;
  }
  throw std::logic_error(fmt::format("option table has no key '{}'", key));
}

void Config::set(std::string_view key, std::string_view text, Source source) {
  const std::size_t index = index_of(key);
  values_[index] = parse_value(table_[index], text);
  sources_[index] = source;
}

const Value& Config::value(std::string_view key) const { return values_[index_of(key)]; }
Source Config::source(std::string_view key) const { return sources_[index_of(key)]; }
bool Config::user_provided(std::string_view key) const {
  const Source source = this->source(key);
  return source == Source::cfg_file || source == Source::command_line;
}

namespace {
template <typename T>
const T& get_as(const Value& value, std::string_view key) {
  const T* typed = std::get_if<T>(&value);
  if (typed == nullptr) throw std::logic_error(fmt::format("key '{}' read with the wrong type or is none", key));
  return *typed;
}
}  // namespace

bool Config::get_bool(std::string_view key) const { return get_as<bool>(value(key), key); }
std::int64_t Config::get_int(std::string_view key) const { return get_as<std::int64_t>(value(key), key); }
double Config::get_real(std::string_view key) const { return get_as<double>(value(key), key); }
const std::string& Config::get_text(std::string_view key) const { return get_as<std::string>(value(key), key); }
RealPair Config::get_pair(std::string_view key) const { return get_as<RealPair>(value(key), key); }
ImageSize Config::get_image_size(std::string_view key) const { return get_as<ImageSize>(value(key), key); }
bool Config::is_none(std::string_view key) const { return std::holds_alternative<std::monostate>(value(key)); }

std::string Config::to_yaml() const {
  YAML::Emitter out;
  out << YAML::BeginMap;
  const auto table = table_;
  for (std::size_t i = 0; i < table.size(); ++i) {
    if (!(table[i].commands & command_)) continue;
    out << YAML::Key << std::string(table[i].name) << YAML::Value;
    const Value& value = values_[i];
    if (std::holds_alternative<std::monostate>(value)) {
      out << YAML::Null;
    } else if (const auto* flag = std::get_if<bool>(&value)) {
      out << *flag;
    } else if (const auto* pair = std::get_if<RealPair>(&value)) {
      out << YAML::Flow << YAML::BeginSeq << format_value(pair->first) << format_value(pair->second) << YAML::EndSeq;
    } else if (const auto* size = std::get_if<ImageSize>(&value)) {
      if (size->height == size->width) {
        out << size->height;
      } else {
        out << YAML::Flow << YAML::BeginSeq << size->height << size->width << YAML::EndSeq;
      }
    } else if (const auto* text = std::get_if<std::string>(&value)) {
      out << YAML::DoubleQuoted << *text;
    } else {
      out << format_value(value);
    }
  }
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace libreyolo::config
