#include "profile/analysis.h"

#include "core/error.h"
#include "profile/kernel_names.h"
#include "profile/verdict.h"
#include "train/host_reads.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <unordered_map>

namespace libreyolo::profile {

namespace {

// A profile.json is checked before any command reads it: the schema this build writes, each key
// the commands use with its type, and every number a measurement (finite, not negative). Row
// tables hold names (strings), flags (booleans) and measurements.
void check_profile(const nlohmann::ordered_json& p, const std::filesystem::path& path) {
  const auto refuse = [&](const std::string& what) {
    throw UsageError(fmt::format("{}: {}; this is not a profile.json of this libreyolo (schema {}): re-run `libreyolo "
                                 "profile run` or train with profile=true",
                                 path.string(), what, kAnalysisSchema));
  };
  if (p["schema"] != kAnalysisSchema) refuse(fmt::format("schema {} is not one this build reads", p["schema"].dump()));
  const auto check_number = [&](const nlohmann::ordered_json& value, const std::string& where) {
    if (value.is_number() && (!std::isfinite(value.get<double>()) || value.get<double>() < 0 || value.get<double>() > 1e15)) {
      refuse(fmt::format("{} is {}, not a measurement", where, value.dump()));
    }
  };
  const auto check_scalar = [&](const nlohmann::ordered_json& value, const std::string& where) {
    if (value.is_structured()) refuse(fmt::format("{} is {}, where a value belongs", where, value.dump().substr(0, 40)));
    check_number(value, where);
  };
  const auto check_rows = [&](const nlohmann::ordered_json& rows, const std::string& where) {
    if (!rows.is_array()) refuse(fmt::format("\"{}\" is not a list", where));
    for (std::size_t i = 0; i < rows.size(); ++i) {
      if (!rows[i].is_object()) refuse(fmt::format("{}[{}] is not an object", where, i));
      for (const auto& [key, value] : rows[i].items()) {
        const std::string at = fmt::format("{}[{}].{}", where, i, key);
        static const std::set<std::string> kNames{"phase", "kernel", "raw_name", "category", "op", "name"};
        if (kNames.count(key) && !value.is_string()) refuse(fmt::format("{} is {}, not a name", at, value.dump()));
        if (key == "tensorcore" && !value.is_boolean()) refuse(fmt::format("{} is {}, not true or false", at, value.dump()));
        if (!kNames.count(key) && key != "tensorcore" && !value.is_number() && !value.is_null()) {
          refuse(fmt::format("{} is {}, not a number", at, value.dump().substr(0, 40)));
        }
        check_number(value, at);
      }
    }
  };
  for (const char* key : {"model", "device_kind", "bound", "bound_why", "levers"}) {
    if (!p.contains(key) || !p[key].is_string()) refuse(fmt::format("\"{}\" is missing or not a string", key));
  }
  for (const char* key : {"metrics", "gpu_trace", "config", "kernels_by_phase", "ops_by_phase"}) {
    if (!p.contains(key) || !p[key].is_object()) refuse(fmt::format("\"{}\" is missing or not an object", key));
  }
  for (const char* key : {"categories", "phases", "top_kernels", "kernels", "ops"}) {
    if (!p.contains(key)) refuse(fmt::format("\"{}\" is missing", key));
    check_rows(p[key], key);
  }
  for (const char* key : {"kernels_by_phase", "ops_by_phase"}) {
    for (const auto& [phase, rows] : p[key].items()) check_rows(rows, fmt::format("{}.{}", key, phase));
  }
  // the measurements are numbers (or null where not measured); only these fields are text
  static const std::set<std::string> kTextFields{"schema", "trace", "model", "device_kind", "bound", "bound_why", "levers"};
  for (const auto& [key, value] : p.items()) {
    if (value.is_structured()) continue;
    if (value.is_string() && !kTextFields.count(key)) refuse(fmt::format("\"{}\" is {}, not a number", key, value.dump().substr(0, 40)));
    check_scalar(value, fmt::format("\"{}\"", key));
  }
  if (p.contains("trace") && !p["trace"].is_string() && !p["trace"].is_null()) {
    refuse(fmt::format("\"trace\" is {}, not the path of a trace file", p["trace"].dump().substr(0, 40)));
  }
  for (const auto& [key, value] : p["metrics"].items()) check_scalar(value, fmt::format("metrics.{}", key));
  for (const auto& [key, value] : p["gpu_trace"].items()) check_scalar(value, fmt::format("gpu_trace.{}", key));
  for (const auto& [key, value] : p["config"].items()) {
    if (value.is_structured()) refuse(fmt::format("config.{} is not a value", key));
  }
  if (p.contains("window") && !p["window"].is_object() && !p["window"].is_null()) refuse("\"window\" is not an object");
  if (p.contains("composition_ms") && !p["composition_ms"].is_null()) {
    if (!p["composition_ms"].is_object()) refuse("\"composition_ms\" is not an object");
    for (const auto& [key, value] : p["composition_ms"].items()) {
      if (!value.is_number()) refuse(fmt::format("composition_ms.{} is not a number", key));
      check_number(value, "composition_ms." + key);
    }
  }
}

}  // namespace

nlohmann::ordered_json load_profile(const std::filesystem::path& given) {
  // A run folder stands for its profile.json (or, without one, its raw trace).
  std::filesystem::path path = given;
  std::error_code error;  // a path that cannot be looked at is reported by the read below
  if (std::filesystem::is_directory(given, error)) {
    path = given / "profile.json";
    if (!std::filesystem::exists(path, error)) path = given / "profile_trace.json";
    if (!std::filesystem::exists(path, error)) {
      throw UsageError(fmt::format("{}: a folder without profile.json or profile_trace.json; give a run folder "
                                   "trained with profile=true, or the path of a profile file", given.string()));
    }
  }
  const std::string text = read_file_text(path);
  const auto document = parse_json_text<nlohmann::json>(text, path);
  if (document.is_object() && document.contains("schema") && !document.contains("traceEvents")) {
    auto profile = parse_json_text<nlohmann::ordered_json>(text, path);  // keeps the file's key order
    check_profile(profile, path);
    return profile;
  }
  const Trace trace = parse_trace(document, path.string());
  std::optional<StepSummary> summary;
  const auto sibling = path.parent_path() / "profile_summary.json";
  if (std::filesystem::exists(sibling, error)) {
    try {
      summary = summary_from_json(parse_json_text<nlohmann::json>(read_file_text(sibling), sibling), sibling.string());
    } catch (const nlohmann::json::exception& error) {
      throw UsageError(fmt::format("{}: not a valid profile summary ({})", sibling.string(), error.what()));
    }
  }
  return analyze(trace, summary, path.string());
}

}  // namespace libreyolo::profile
