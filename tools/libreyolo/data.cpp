// `libreyolo data check data=...`: scan every split and report what training would see.
#include "commands.h"
#include "core/config.h"
#include "core/error.h"
#include "core/log.h"
#include "core/option_help.h"
#include "data/dataset_yaml.h"
#include "data/label_scan.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <map>

namespace libreyolo::cli {

namespace {

struct SplitReport {
  std::string name;
  data::ScanResult scan;
  std::vector<int> images_per_class;
  std::vector<int> instances_per_class;
  std::map<int, int> long_side_histogram;  // bucket lower bound -> images
};

int size_bucket(int long_side) {
  for (const int bound : {2560, 1280, 640, 320, 160}) {
    if (long_side >= bound) return bound;
  }
  return 0;
}

SplitReport scan_split(const data::DatasetSpec& spec, const std::string& split, int workers) {
  SplitReport report;
  report.name = split;
  const auto images = data::list_images(spec.split(split), split);
  report.scan = data::scan_images(images, spec.class_count(), {.threads = std::max(1, workers)});
  report.images_per_class.assign(spec.names.size(), 0);
  report.instances_per_class.assign(spec.names.size(), 0);
  for (const auto& record : report.scan.images) {
    std::vector<bool> seen(spec.names.size(), false);
    for (const auto& box : record.boxes) {
      ++report.instances_per_class[box.cls];
      seen[box.cls] = true;
    }
    for (std::size_t c = 0; c < seen.size(); ++c) report.images_per_class[c] += seen[c] ? 1 : 0;
    ++report.long_side_histogram[size_bucket(std::max(record.width, record.height))];
  }
  return report;
}

void print_report(const data::DatasetSpec& spec, const SplitReport& report) {
  fmt::print("{}: {}{}\n", report.name, report.scan.summary(), report.scan.from_cache ? " (from cache)" : "");
  for (const auto& message : report.scan.messages) fmt::print("  {}\n", message);
  fmt::print("  {:>22} {:>10} {:>10}\n", "class", "images", "instances");
  for (std::size_t c = 0; c < spec.names.size(); ++c) {
    if (report.instances_per_class[c] == 0) continue;
    fmt::print("  {:>22} {:>10} {:>10}\n", spec.names[c], report.images_per_class[c], report.instances_per_class[c]);
  }
  fmt::print("  image long side:");
  for (const auto& [bucket, count] : report.long_side_histogram) fmt::print(" >={}px: {}", bucket, count);
  fmt::print("\n");
}

nlohmann::json report_json(const data::DatasetSpec& spec, const SplitReport& report) {
  nlohmann::json classes = nlohmann::json::object();
  for (std::size_t c = 0; c < spec.names.size(); ++c) {
    classes[spec.names[c]] = {{"images", report.images_per_class[c]}, {"instances", report.instances_per_class[c]}};
  }
  nlohmann::json histogram = nlohmann::json::object();
  for (const auto& [bucket, count] : report.long_side_histogram) histogram[std::to_string(bucket)] = count;
  return {{"images", report.scan.images.size()},  {"backgrounds", report.scan.backgrounds},
          {"corrupt", report.scan.corrupt},       {"missing_labels", report.scan.missing_labels},
          {"duplicates_removed", report.scan.duplicates_removed},
          {"messages", report.scan.messages},     {"classes", classes},
          {"long_side_histogram", histogram}};
}

int run_data_check(const Arguments& arguments) {
  const auto config = config::Config::from_arguments(config::command_data, arguments);
  log::set_quiet(config.get_bool("quiet"));
  if (config.get_text("data").empty()) {
    throw UsageError("data= is required: libreyolo data check data=my_data.yaml (or coco8, coco128, coco)");
  }
  const auto spec = data::load_dataset_spec(config.get_text("data"));
  nlohmann::json out = {{"yaml", spec.yaml_file.string()}, {"root", spec.root.string()}, {"nc", spec.class_count()}};
  bool any_image = false;
  if (!config.get_bool("json")) fmt::print("{} ({} classes, root {})\n", spec.yaml_file.string(), spec.class_count(), spec.root.string());
  for (const std::string split : {"train", "val", "test"}) {
    if (spec.split(split).empty()) continue;
    const auto report = scan_split(spec, split, static_cast<int>(config.get_int("workers")));
    any_image = any_image || !report.scan.images.empty();
    if (config.get_bool("json")) {
      out[split] = report_json(spec, report);
    } else {
      print_report(spec, report);
    }
  }
  if (config.get_bool("json")) fmt::print("{}\n", out.dump(2));
  if (!any_image) throw DataError(fmt::format("{}: no valid image in any split", spec.yaml_file.string()));
  return 0;
}

}  // namespace

int run_data(const Arguments& arguments) {
  const std::string action = arguments.empty() ? "" : arguments.front();
  const Arguments rest = arguments.empty() ? Arguments{} : Arguments(arguments.begin() + 1, arguments.end());
  if (action == "check") return run_data_check(rest);
  if (action.empty() || action == "--help" || action == "-h" || action == "help") {
    fmt::print("usage: libreyolo data check data=<yaml|coco8|coco128|coco> [workers=N] [json=true]\n"
               "  check   scan every split: kept/background/corrupt counts, per-class counts, image sizes\n");
    return action.empty() ? 2 : 0;
  }
  throw UsageError(fmt::format("unknown data action '{}': use 'libreyolo data check data=...'", action));
}

}  // namespace libreyolo::cli
