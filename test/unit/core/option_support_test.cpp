// Every option key is honoured, logged or refused, and the table says which; a key the program
// claims to honour is read by some code, and the module layering holds.
#include "core/config.h"
#include "core/error.h"
#include "core/option_table.h"
#include "core/option_value.h"
#include "models/checkpoint.h"
#include "models/family.h"
#include "test_util.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <unistd.h>
#include <string>
#include <vector>

#include "catch.h"  // last: see catch.h

using namespace libreyolo;
using namespace libreyolo::config;
namespace fs = std::filesystem;

namespace {

fs::path source_root() {
  const char* root = std::getenv("LIBREYOLO_SOURCE_ROOT");
  REQUIRE(root != nullptr);
  return root;
}

// Every C++ source under lib/ and tools/, concatenated, with the keys' declarations (`.name =
// "key"`: the core table's and the families') blanked, so a key counts as read only where code reads it.
std::string program_sources() {
  std::string all;
  for (const char* dir : {"lib", "tools"}) {
    for (const auto& entry : fs::recursive_directory_iterator(source_root() / dir)) {
      const auto ext = entry.path().extension();
      if (ext != ".cpp" && ext != ".h") continue;
      all += test_util::read_all(entry.path());
    }
  }
  return std::regex_replace(all, std::regex(R"(\.name = "[a-z0-9_]+")"), ".name = ?");
}

Command first_command(unsigned commands) {
  for (const Command c : {command_train, command_val, command_predict, command_profile, command_data, command_info}) {
    if (commands & c) return c;
  }
  return command_train;
}

// A valid value other than the key's default, as a user would type it.
std::string other_value(const OptionSpec& spec) {
  switch (spec.type) {
    case ValueType::boolean: return spec.default_value == "true" ? "false" : "true";
    case ValueType::text: return "x.pt";
    case ValueType::choice: return std::string(spec.choices.substr(spec.choices.rfind(' ') + 1));
    default: return spec.maximum ? fmt::format("{}", *spec.maximum) : "1";
  }
}

}  // namespace

TEST_CASE("Every key is in the table once, and no alias is also a key", "[support]") {
  std::set<std::string_view> names;
  for (const auto& spec : libreyolo::models::option_table()) {
    INFO(spec.name);
    CHECK(names.insert(spec.name).second);  // a second entry would shadow the first's default and help
  }
  for (const auto& alias : libreyolo::config::aliases()) {
    INFO(alias.alias);
    CHECK(names.count(alias.alias) == 0);
  }
}

TEST_CASE("Every key of the table is honoured, logged or refused", "[support]") {
  const std::string sources = program_sources();
  for (const auto& spec : libreyolo::models::option_table()) {
    INFO(spec.name);
    CHECK(spec.support != Support::unclassified);
    if (spec.support == Support::honoured) {
      // read somewhere by name (config.get_*("key") or a spec name comparison)
      CHECK(sources.find(fmt::format("\"{}\"", spec.name)) != std::string::npos);
    } else {
      CHECK(!spec.why.empty());
    }
  }
}

TEST_CASE("A refused key takes only its default; anything else exits 2 and says why", "[support]") {
  int refused = 0;
  for (const auto& spec : libreyolo::models::option_table()) {
    if (spec.support != Support::refused) continue;
    ++refused;
    INFO(spec.name);
    const Command command = first_command(spec.commands);
    const std::vector<std::string> with_default{fmt::format("{}={}", spec.name, spec.default_value.empty() ? "" : spec.default_value)};
    CHECK_NOTHROW(models::parse_arguments(command, with_default));
    const std::vector<std::string> with_other{fmt::format("{}={}", spec.name, other_value(spec))};
    try {
      models::parse_arguments(command, with_other);
      FAIL("accepted " << with_other[0]);
    } catch (const UsageError& error) {
      CHECK_THAT(error.what(), Catch::Contains("is not supported") && Catch::Contains(std::string(spec.why)));
      CHECK(static_cast<int>(error.exit_code()) == 2);
    }
  }
  CHECK(refused >= 8);
}

TEST_CASE("A logged key set by the user is listed once for its log line; defaults and family values are not", "[support]") {
  const auto listed = [](std::vector<std::string> arguments) {
    std::vector<std::string> names;
    for (const auto* spec : models::parse_arguments(command_train, arguments).logged_keys_set()) names.emplace_back(spec->name);
    return names;
  };
  CHECK(listed({"model=yolo9-t"}).empty());  // YOLOv9's family default sync_bn=true is no request
  CHECK(listed({"model=yolo9-t", "cuda_graph=false"}).empty());
  CHECK(listed({"model=yolo9-t", "cuda_graph=true", "sync_bn=true"}) == std::vector<std::string>{"sync_bn"});  // cuda_graph: honoured
  // a run's train_config.yaml repeats YOLOv9's sync_bn=true: a resumed run logs nothing for it
  const auto cfg = fs::temp_directory_path() / ("libreyolo_support_" + std::to_string(::getpid()) + ".yaml");
  test_util::write_all(cfg, "sync_bn: true\ncuda_graph: false\n");
  CHECK(listed({"model=yolo9-t", "cfg=" + cfg.string()}).empty());
  fs::remove(cfg);
}

namespace {

// The code of a source line: "" for a comment line, the text before a trailing // comment otherwise
// (a // inside a string literal cuts the line short: a rare miss, never a false alarm).
std::string code_of(const std::string& line) {
  const auto first = line.find_first_not_of(" \t");
  if (first == std::string::npos || line.compare(first, 2, "//") == 0 || line.compare(first, 1, "*") == 0 ||
      line.compare(first, 2, "/*") == 0) {
    return {};
  }
  const auto comment = line.find("//");
  return comment == std::string::npos ? line : line.substr(0, comment);
}

// A registered family's name as a word of its own in `code`: a string literal ("yolo9", "yolo9-t"),
// an identifier or part of one (yolo9_sample, Recipe::yolox, mixup_yolox) or an include path
// (models/yolo9/...); not inside a longer word (LibreYOLO's scheduler value yoloxwarmcos).
std::regex family_word_pattern() {
  std::vector<std::string> names;
  for (const auto* family : libreyolo::models::families()) names.emplace_back(family->name());
  std::sort(names.begin(), names.end(), [](const auto& a, const auto& b) { return a.size() > b.size(); });
  std::string alternatives;
  for (const auto& name : names) alternatives += (alternatives.empty() ? "" : "|") + name;
  return std::regex("(^|[^A-Za-z0-9])(" + alternatives + ")($|[^A-Za-z0-9])");
}

// Lines outside lib/models/ that name a family and may: none. The default model, the model list,
// the examples and `profile run`'s model come from the registry. A line listed here that no
// longer exists fails too (the list only shrinks).
const std::set<std::string> kKnownLines{};

}  // namespace

TEST_CASE("Only lib/models/ names a model family: a family brings its own recipe, pipeline and files", "[support]") {
  const std::regex named = family_word_pattern();
  REQUIRE(std::regex_search(std::string("rtdetrv4"), named));
  std::size_t scanned = 0;
  std::set<std::string> found_known;
  for (const char* dir : {"lib", "tools"}) {
    for (const auto& entry : fs::recursive_directory_iterator(source_root() / dir)) {
      const auto relative = entry.path().lexically_relative(source_root()).string();
      if (!entry.is_regular_file() || relative.starts_with("lib/models/")) continue;
      const auto extension = entry.path().extension();
      if (extension != ".cpp" && extension != ".h") continue;
      ++scanned;
      std::istringstream text(test_util::read_all(entry.path()));
      std::string line;
      for (int number = 1; std::getline(text, line); ++number) {
        if (!std::regex_search(code_of(line), named)) continue;
        const std::string key = relative + ":" + line;
        if (kKnownLines.count(key)) {
          found_known.insert(key);
          continue;
        }
        INFO(relative << ":" << number << " names a model family; ask the family (models/family.h) instead:\n" << line);
        CHECK(false);
      }
    }
  }
  CHECK(scanned > 50);
  for (const auto& known : kKnownLines) {
    INFO(known << "\n  is listed as a known line but no longer exists: drop it from kKnownLines");
    CHECK(found_known.count(known) == 1);
  }
  // the pattern finds what it forbids, and lets through what it allows
  const auto flags = [&](const std::string& line) { return std::regex_search(code_of(line), named); };
  CHECK(flags(R"(if (config.family() == "yolo9"))"));
  CHECK(flags(R"(if (name == "deim-n"))"));
  CHECK(flags(R"(case "rtmdet": return 1;)"));
  CHECK(flags("Sample yolo9_sample(std::size_t index) const;"));
  CHECK(flags("enum class Recipe { yolo9, yolov5, yolox, detr, dfine, deim };"));
  CHECK(flags("if (recipe == Recipe::yolox) return 1;"));
  CHECK(flags("Sample mixup_yolox(const Sample& a);"));
  CHECK(flags("#include \"models/yolo9/model.h\""));
  CHECK(flags("#include \"models/rtdetrv4/family.h\""));
  CHECK_FALSE(flags(R"(scheduler == "yoloxwarmcos")"));
  CHECK_FALSE(flags("// YOLOv9's recipe: yolo9 trains at 640"));
  CHECK_FALSE(flags("const int x = 1;  // yolo9 does the same"));
  CHECK_FALSE(flags("#include \"models/family.h\""));
}

TEST_CASE("No source file under lib/ is over 25 KB: a file that grows past it splits along its seams", "[support]") {
  constexpr std::uintmax_t kLimit = 25 * 1024;
  std::size_t scanned = 0;
  for (const auto& entry : fs::recursive_directory_iterator(source_root() / "lib")) {
    if (!entry.is_regular_file() || entry.path().extension() != ".cpp") continue;
    ++scanned;
    INFO(entry.path().lexically_relative(source_root()).string() << " is " << entry.file_size() << " bytes");
    CHECK(entry.file_size() <= kLimit);
  }
  CHECK(scanned > 100);
}

namespace {

// The modules' layers, lowest first: a file may include its own module's headers and those of
// lower layers only (cuda holds the bare CUDA queries everything may ask; pch is the build's
// precompiled header). profile and dist share a layer and include neither the other.
const std::map<std::string, int> kLayers{{"cuda", 0}, {"core", 1}, {"nn", 2}, {"data", 3}, {"models", 4}, {"eval", 5},
                                         {"train", 6}, {"profile", 7}, {"dist", 7}, {"tools", 8}};

// The includes of `text` (a file of module `module`) that reach a module of its own layer or above.
std::vector<std::string> upward_includes(const std::string& module, const std::string& text) {
  static const std::regex include(R"re(#include\s+"([a-z_]+)/)re");
  std::vector<std::string> found;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), include); it != std::sregex_iterator(); ++it) {
    const std::string target = (*it)[1];
    if (target == module || !kLayers.count(target)) continue;
    if (kLayers.at(target) >= kLayers.at(module)) found.push_back(target + "/");
  }
  return found;
}

}  // namespace

TEST_CASE("Module layering: cuda <- core <- nn <- data <- models <- eval <- train <- profile, dist <- tools", "[support]") {
  std::size_t scanned = 0;
  for (const char* top : {"lib", "tools"}) {
    for (const auto& entry : fs::recursive_directory_iterator(source_root() / top)) {
      const auto extension = entry.path().extension();
      if (!entry.is_regular_file() || (extension != ".cpp" && extension != ".h")) continue;
      const auto relative = entry.path().lexically_relative(source_root());
      const std::string module = std::string(top) == "tools" ? "tools" : (*std::next(relative.begin())).string();
      if (module == "pch") continue;
      INFO(relative.string() << " is in module " << module);
      REQUIRE(kLayers.count(module));  // a new module takes its place in kLayers
      ++scanned;
      const auto upward = upward_includes(module, test_util::read_all(entry.path()));
      INFO("it includes from its own layer or above: " << (upward.empty() ? std::string() : upward.front()));
      CHECK(upward.empty());
    }
  }
  CHECK(scanned > 250);
  // the pattern finds what it forbids, and lets through what is allowed
  CHECK(upward_includes("core", "#include \"models/family.h\"\n") == std::vector<std::string>{"models/"});
  CHECK(upward_includes("train", "#include \"profile/trace.h\"\n") == std::vector<std::string>{"profile/"});
  CHECK(upward_includes("profile", "#include \"dist/collectives.h\"\n") == std::vector<std::string>{"dist/"});
  CHECK(upward_includes("train", "#include \"models/family.h\"\n#include \"train/setup.h\"\n#include <vector>\n").empty());
}

TEST_CASE("The loop leaves CUDA graphs to the step runner and data-parallel agreement to RankAgreement", "[support]") {
  // trainer.cpp decides what happens; how a step runs (eager or replayed) and how the ranks agree
  // live behind train/step_runner.h and train/rank_agreement.h
  const std::regex reaches(R"re(\bgraphs\.|GraphManager|InferenceGraphs|place\.dist|\bdist->|->(sum|max|gather_rows)\()re");
  const std::string loop = test_util::read_all(source_root() / "lib/train/trainer.cpp");
  std::smatch found;
  INFO("lib/train/trainer.cpp reaches " << (std::regex_search(loop, found, reaches) ? found.str() : std::string()));
  CHECK_FALSE(std::regex_search(loop, reaches));
  CHECK(std::regex_search(std::string("if (t_.graphs.training) t_.dist->max(vote);"), reaches));  // the pattern finds what it forbids
  CHECK(loop.find("runner_.optimizer_step") != std::string::npos);
}

TEST_CASE("A family declares its own keys: tagged with its families, its default for its models, warned elsewhere", "[support]") {
  const auto table = models::option_table();
  const auto families_of = [&](std::string_view key) { return std::string(find_option(table, key)->families); };
  CHECK(families_of("aux_weight") == "yolo9");
  CHECK(families_of("box") == "yolo9 yolov5");
  CHECK(families_of("obj") == "yolov5");
  CHECK(families_of("lr_backbone") == "rtdetr");
  CHECK(families_of("backbone_lr_mult") == "rtdetrv4 dfine deim");
  CHECK(families_of("ema_restart_decay") == "rtdetrv4 dfine deim");
  CHECK(families_of("lr0").empty());  // a core key
  CHECK(find_option(core_option_table(), "aux_weight") == nullptr);  // not in the core table
  // Two families' helps, each named; one family's as written.
  CHECK_THAT(std::string(find_option(table, "box")->help), Catch::Contains("yolo9: ") && Catch::Contains("; yolov5: "));
  CHECK(std::string(find_option(table, "dfl")->help).find("yolo9:") == std::string::npos);
  // A declared default applies to the family's models (YOLOv5's box gain 0.05, YOLOv9's 7.5).
  CHECK(models::parse_arguments(command_train, std::vector<std::string>{"model=yolov5n"}).get_real("box") == 0.05);
  CHECK(models::parse_arguments(command_train, std::vector<std::string>{"model=yolo9-t"}).get_real("box") == 7.5);
  // The model key's default and help come from the registry.
  CHECK(std::string(find_option(table, "model")->default_value) == std::string(models::default_model()));
  CHECK_THAT(std::string(find_option(table, "model")->help), Catch::Contains("rtdetrv4-"));
  const auto other = [](std::vector<std::string> arguments) {
    std::vector<std::string> names;
    for (const auto* spec : models::parse_arguments(command_train, arguments).keys_of_other_families()) names.emplace_back(spec->name);
    return names;
  };
  CHECK(other({"model=yolox-n", "aux_weight=0.5", "lr0=0.02"}) == std::vector<std::string>{"aux_weight"});
  CHECK(other({"model=yolo9-t", "aux_weight=0.5", "box=5"}).empty());
  CHECK(other({"model=yolox-n", "aux_weight=0.25"}).empty());  // the default is no request
  CHECK(other({"model=dfine-n", "backbone_lr_mult=0.3", "anchor_t=3"}) == std::vector<std::string>{"anchor_t"});
  CHECK(other({"model=yolo9-t", "ema_restart_decay=0.99"}) == std::vector<std::string>{"ema_restart_decay"});
  CHECK(other({"model=deim-n", "ema_restart_decay=0.99"}).empty());
  // --help names the families of a family's key.
  const std::string help = models::command_help(command_train);
  CHECK_THAT(help, Catch::Contains("families: yolo9, yolov5"));
  CHECK_THAT(help, Catch::Contains("family defaults: yolov5: 0.05"));
}

TEST_CASE("The option table refuses families that declare one key two ways, or a core key", "[support]") {
  const OptionSpec core[] = {{.name = "lr0", .type = ValueType::real, .default_value = "0.01", .group = "optimizer", .help = "rate"}};
  const OptionSpec gain[] = {{.name = "gain", .type = ValueType::real, .default_value = "1", .group = "loss", .help = "a gain",
                              .minimum = 0, .maximum = 10}};
  const OptionSpec wider[] = {{.name = "gain", .type = ValueType::real, .default_value = "2", .group = "loss", .help = "its gain",
                               .minimum = 0, .maximum = 100}};
  const OptionSpec same[] = {{.name = "gain", .type = ValueType::real, .default_value = "2", .group = "loss", .help = "a gain",
                              .minimum = 0, .maximum = 10}};
  const FamilyKeys clash[] = {{"a", gain}, {"b", wider}};
  CHECK_THROWS_AS(OptionTable(core, clash), std::logic_error);
  const FamilyKeys shadow[] = {{"a", core}};
  CHECK_THROWS_AS(OptionTable(core, shadow), std::logic_error);
  const FamilyKeys agree[] = {{"a", gain}, {"b", same}};
  const OptionTable table(core, agree);
  REQUIRE(table.specs().size() == 2);
  CHECK(table.specs()[1].families == "a b");
  CHECK(table.specs()[1].default_value == "1");  // the first family's
  CHECK(table.specs()[1].help == "a gain");      // both say the same
  CHECK(applies_to(table.specs()[1], "b"));
  CHECK(!applies_to(table.specs()[1], "c"));
  CHECK(applies_to(table.specs()[0], "c"));  // a core key
}
