// A resolved configuration: every key of the option table with its typed value and where the
// value came from. Resolution order: table default < family default < cfg= file < command line
// (a family default never replaces a value the user gave, as in LibreYOLO).
#pragma once

#include "core/option_table.h"
#include "core/option_value.h"

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace libreyolo::config {

// Family and size of a `model=` value. Naming models is the model layer's business: the caller
// hands in the identifier (models::identify_model), so the config never opens a weights file itself.
struct ModelIdentity {
  std::string family, size;
  std::vector<OptionDefault> defaults;  // the family's recipe for this size (later entries win)
};
using ModelIdentifier = std::function<ModelIdentity(const std::string& model)>;

enum class Source { table_default, family_default, command_default, cfg_file, command_line };
std::string_view source_name(Source source);

class Config {
 public:
  // Table defaults (plus the command's own defaults), no family applied. `table` (the core keys
  // and the families': models::option_table()) must outlive the Config.
  Config(Command command, std::span<const OptionSpec> table);

  // Parses `key=value`, `--key value`, `--key=value`, bare bool keys, `--no-key`, aliases and
  // `cfg=file.yaml`; throws UsageError (exit 2) for anything it cannot accept. `identify` names
  // the model's family and size, whose defaults are then applied.
  static Config from_arguments(Command command, std::span<const std::string> arguments, const ModelIdentifier& identify,
                               std::span<const OptionSpec> table);

  Command command() const { return command_; }
  // Every key this configuration holds (the table it was built with), in the table's order.
  std::span<const OptionSpec> table() const { return table_; }
  const Value& value(std::string_view key) const;
  Source source(std::string_view key) const;
  bool user_provided(std::string_view key) const;

  bool get_bool(std::string_view key) const;
  std::int64_t get_int(std::string_view key) const;
  double get_real(std::string_view key) const;
  const std::string& get_text(std::string_view key) const;  // text, choice and flag_or_path keys
  RealPair get_pair(std::string_view key) const;
  ImageSize get_image_size(std::string_view key) const;
  bool is_none(std::string_view key) const;

  // Parses `text` for `key` and records it with `source` (the parse errors name the key).
  void set(std::string_view key, std::string_view text, Source source);

  // Model family ("yolo9", "yolox") and size from `model`, empty when the name does not tell.
  const std::string& family() const { return family_; }
  const std::string& size() const { return size_; }

  // Keys the user set to something other than the default: on the command line the table's, in a
  // cfg file (such as a run's train_config.yaml, which repeats the family's values) the family's.
  bool differs_from_default(std::string_view key) const;
  // Keys the user set that the program accepts but does not act on (Support::logged), for the
  // one log line each owes: "key=value".
  std::vector<const OptionSpec*> logged_keys_set() const;
  // Keys the user set that belong to other families than the model's (OptionSpec::families), for
  // the warning each owes: the run goes on without them.
  std::vector<const OptionSpec*> keys_of_other_families() const;

  // One line per Ultralytics alias used, for the log.
  const std::vector<std::string>& notes() const { return notes_; }

  // Every key of the command with its resolved value (tuples as lists), ready for
  // train_config.yaml; the file loads back with cfg=.
  std::string to_yaml() const;

 private:
  std::size_t index_of(std::string_view key) const;
  void load_cfg_file(const std::string& path);
  void apply_token(std::string_view key, std::string_view text, Source source, std::string_view context);
  void apply_family_defaults(const ModelIdentifier& identify);
  void refuse_unsupported() const;
  void round_image_size();

  Command command_;
  std::span<const OptionSpec> table_;
  std::vector<Value> values_;   // indexed like table_
  std::vector<Source> sources_;
  std::string family_;
  std::string size_;
  std::vector<OptionDefault> family_defaults_;
  std::vector<std::string> notes_;
};

}  // namespace libreyolo::config
