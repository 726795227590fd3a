// The declarative table of every key the commands accept: type, default, range, help and which
// subcommands take it. The core table holds the keys every family shares; each model family
// declares its own (models::Family::options()), and OptionTable puts them together, each key
// tagged with the families it applies to. Parsing, `libreyolo cfg`, `--help`, the man page check
// and the "did you mean" suggestions all read the table a Config was built with
// (models::option_table(): the core keys and every registered family's); nothing else defines a key.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace libreyolo::config {

enum class ValueType {
  boolean,       // true/false, 1/0, yes/no; a bare key means true
  integer,
  real,
  text,
  choice,        // one of `choices`, after lower-casing and `synonyms`
  real_pair,     // (0.1,2.0) or [0.1, 2.0] or 0.1,2.0
  image_size,    // 640 or 480x640 (height x width)
  flag_or_path,  // true/false or a path (resume=)
};

// Subcommands, as bits so one key can belong to several.
enum Command : unsigned {
  command_train = 1u << 0,
  command_val = 1u << 1,
  command_predict = 1u << 2,
  command_profile = 1u << 3,
  command_data = 1u << 4,  // libreyolo data check|preview|bench|synth
  command_info = 1u << 5,  // libreyolo info
};
inline constexpr unsigned command_all =
    command_train | command_val | command_predict | command_profile | command_data | command_info;

// What the program does with a key (the table test fails on a key left unclassified).
enum class Support {
  unclassified,
  honoured,  // read and applied
  logged,    // accepted; the run goes on without it and logs one line that says why (`why`)
  refused,   // anything but its default is a usage error (exit 2) that says why (`why`)
};

struct OptionSpec {
  std::string_view name;
  ValueType type;
  std::string_view default_value;  // in the same syntax a user types; "none" = unset
  std::string_view group;
  std::string_view help;
  unsigned commands = command_train;
  std::optional<double> minimum = std::nullopt;
  std::optional<double> maximum = std::nullopt;
  std::string_view choices = {};   // space separated
  std::string_view synonyms = {};  // space separated `alias=choice`
  bool nullable = false;           // accepts `none`
  Support support = Support::unclassified;
  std::string_view why = {};       // for logged and refused keys: the reason, as users read it
  // The families whose own key this is (space separated), filled by OptionTable from what the
  // families declare; empty: a core key, which every family takes.
  std::string_view families = {};
};

// A family's own keys, as it declares them (models::Family::options()).
struct FamilyKeys {
  std::string_view family;
  std::span<const OptionSpec> keys;
};

// The core keys and the families' own, in one table: a family key follows the last key of its
// group (or closes the table where its group is new). A key several families declare is one entry
// whose type, range, choices and commands they must agree on (std::logic_error otherwise: a
// programming error); its default is the first family's (each family's own applies to its models:
// models::parse_arguments), its help each family's, and `families` lists them all.
class OptionTable {
 public:
  OptionTable(std::span<const OptionSpec> core, std::span<const FamilyKeys> families);
  OptionTable(const OptionTable&) = delete;  // the specs view text the table owns
  OptionTable& operator=(const OptionTable&) = delete;

  std::span<const OptionSpec> specs() const { return specs_; }

 private:
  std::string_view keep(std::string text);
  std::deque<std::string> text_;
  std::vector<OptionSpec> specs_;
};

// A model family's own default for a key (its recipe), replacing the table's unless the user gave
// the key. Each family supplies its list (lib/models/<family>/recipe.cpp); core knows no family.
struct OptionDefault {
  std::string_view key;
  std::string_view value;
};

enum class AliasKind {
  rename,            // same value, our name
  symmetric_range,   // scale=s  ->  mosaic_scale=(1-s,1+s)
  bool_to_choice,    // cos_lr=true -> scheduler=cos (false: keep the scheduler)
};

// Ultralytics spellings accepted for LibreYOLO keys.
struct Alias {
  std::string_view alias;
  std::string_view key;
  AliasKind kind = AliasKind::rename;
  std::string_view value_when_true = {};  // for bool_to_choice
};

// The keys every family shares (core/option_keys_*.cpp).
std::span<const OptionSpec> core_option_table();
std::span<const Alias> aliases();

const OptionSpec* find_option(std::span<const OptionSpec> table, std::string_view name);
// Whether a key applies to `family` (a core key, or one the family declares); an empty family
// (a name that does not tell) takes every key.
bool applies_to(const OptionSpec& spec, std::string_view family);
const Alias* find_alias(std::string_view name);
std::string_view command_name(Command command);
std::string_view type_name(ValueType type);

}  // namespace libreyolo::config
