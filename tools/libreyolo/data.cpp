// `libreyolo data check data=...`: scan every split and report what training would see.
#include "commands.h"
#include "core/config.h"
#include "models/family.h"
#include "models/checkpoint.h"
#include "core/error.h"
#include "core/log.h"
#include "core/printable.h"
#include "core/option_help.h"
#include "data/dataset_yaml.h"
#include "data/label_scan.h"
#include "core/atomic_file.h"
#include "data/image_io.h"
#include "data/preview.h"
#include "data/synth.h"
#include "data/box_crops.h"
#include "data/image_folder.h"
#include "data/training_data.h"
#include "eval/task.h"


#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <map>

namespace libreyolo::cli {

namespace {

int run_data_check(const Arguments& arguments) {
  const auto config = models::parse_arguments(config::command_data, arguments);
  log::set_quiet(config.get_bool("quiet"));
  if (config.get_text("data").empty()) {
    throw UsageError("data= is required: libreyolo data check data=my_data.yaml (or coco8, coco128, coco)");
  }
  // an ImageFolder root is a classification set unless the task or a model says otherwise
  const bool image_folder = !config.user_provided("task") && !config.user_provided("model") &&
                            data::is_image_folder_root(config.get_text("data"));
  const eval::Task& task = image_folder ? eval::classify_task() : eval::task_of(config);
  if (image_folder) log::info("data={}: an ImageFolder layout, checked as task=classify", config.get_text("data"));
  const auto spec = task.load_spec(config.get_text("data"));
  nlohmann::json out = {{"yaml", spec.yaml_file.string()}, {"root", spec.root.string()}, {"nc", spec.class_count()}};
  bool any_image = false;
  if (!config.get_bool("json")) fmt::print("{} ({} classes, root {})\n", spec.yaml_file.string(), spec.class_count(), spec.root.string());
  for (const std::string split : {"train", "val", "test"}) {
    if (spec.split(split).empty()) continue;
    const eval::SplitCheck check = task.check_split(spec, split, static_cast<int>(config.get_int("workers")));
    any_image = any_image || check.images > 0;
    if (config.get_bool("json")) {
      out[split] = check.json;
    } else {
      fmt::print("{}", check.text);
    }
  }
  if (config.get_bool("json")) fmt::print("{}\n", out.dump(2));
  if (!any_image) throw DataError(fmt::format("{}: no valid image in any split", spec.yaml_file.string()));
  return 0;
}

config::Config data_config(const Arguments& arguments) {
  auto config = models::parse_arguments(config::command_data, arguments);
  log::set_quiet(config.get_bool("quiet"));
  return config;
}

int run_data_synth(const Arguments& arguments) {
  const auto config = data_config(arguments);
  data::SynthOptions options;
  options.out = config.get_text("out");
  options.train_images = static_cast<int>(config.get_int("synth_images"));
  options.val_images = static_cast<int>(config.get_int("synth_val_images"));
  options.image_size = static_cast<int>(config.get_int("synth_size"));
  options.seed = static_cast<std::uint64_t>(config.get_int("seed"));
  const auto result = data::write_synthetic_dataset(options);
  log::info("wrote {} images with {} boxes; use data={}", result.images, result.boxes, result.yaml.string());
  if (config.get_bool("json")) {
    fmt::print("{}\n", nlohmann::json{{"yaml", result.yaml.string()}, {"images", result.images}, {"boxes", result.boxes}}.dump());
  }
  return 0;
}

// A detection dataset's boxes as an ImageFolder classification dataset.
int run_data_crops(const Arguments& arguments) {
  const auto config = data_config(arguments);
  if (config.get_text("data").empty()) throw UsageError("data= is required: libreyolo data crops data=coco128 out=DIR");
  const auto spec = data::load_dataset_spec(config.get_text("data"));
  const auto result = data::write_box_crops(spec, {.out = config.get_text("out"), .margin = config.get_real("crop_margin"),
                                                   .min_size = static_cast<int>(config.get_int("crop_min_size")),
                                                   .val_fraction = config.get_real("val_fraction"),
                                                   .workers = static_cast<int>(std::max<std::int64_t>(1, config.get_int("workers")))});
  log::info("{} images: {} train and {} val crops in {} classes ({} boxes under {} px left out)", result.images, result.train,
            result.val, result.classes.size(), result.too_small, config.get_int("crop_min_size"));
  if (!result.dropped.empty()) {
    log::info("left out for lacking a train or a val crop: {}", fmt::join(result.dropped, ", "));
  }
  log::info("use data={}", config.get_text("out"));
  if (config.get_bool("json")) {
    fmt::print("{}\n", nlohmann::json{{"out", config.get_text("out")}, {"images", result.images}, {"train", result.train},
                                      {"val", result.val}, {"classes", result.classes}, {"dropped", result.dropped},
                                      {"too_small", result.too_small}}.dump());
  }
  return 0;
}

int run_data_preview(const Arguments& arguments) {
  const auto config = data_config(arguments);
  if (config.get_text("data").empty()) throw UsageError("data= is required: libreyolo data preview data=... out=preview.jpg");
  const auto training = eval::task_of(config).load_training_data(config, models::family_of(config).sample_pipeline());
  const data::TrainPipeline* pipeline = training.detection_pipeline();
  if (!pipeline) throw UsageError(fmt::format("libreyolo data preview draws detection samples; task={} has none yet", config.get_text("task")));
  const int count = static_cast<int>(std::min<std::int64_t>(config.get_int("preview_images"),
                                                            static_cast<std::int64_t>(training.dataset->size())));
  std::vector<cv::Mat> drawn;
  for (int i = 0; i < count; ++i) {
    drawn.push_back(data::draw_sample(pipeline->sample(static_cast<std::size_t>(i), 0), training.spec.names));
  }
  const cv::Mat grid = data::tile_grid(drawn, std::min(pipeline->config().image_size, 480));
  const std::string out = config.get_text("out").empty() ? "runs/data/preview.jpg" : config.get_text("out");
  std::string extension = std::filesystem::path(out).extension().string();
  if (extension.empty()) extension = ".jpg";
  const std::vector<std::uint8_t> encoded = data::encode_image(grid, extension, 90);
  if (encoded.empty()) {
    throw UsageError(fmt::format("out={}: cannot write '{}' images; use .jpg{}", out, extension, data::reads_all_formats() ? " or .png" : ""));
  }
  write_file_atomically(out, std::string_view(reinterpret_cast<const char*>(encoded.data()), encoded.size()));
  log::info("{} augmented samples ({} pipeline) written to {}", count, pipeline->steps().name(), out);
  return 0;
}

}  // namespace

int run_data(const Arguments& arguments) {
  const std::string action = arguments.empty() ? "" : arguments.front();
  const Arguments rest = arguments.empty() ? Arguments{} : Arguments(arguments.begin() + 1, arguments.end());
  if (action.empty() || wants_help({action})) {
    fmt::print("usage: libreyolo data <action> key=value ...\n"
               "  check    data=...            scan every split: kept/background/corrupt counts, classes, sizes\n"
               "  preview  data=... out=x.jpg  grid of augmented training samples with boxes and class names\n"
               "  bench    data=...            images/s of the full training pipeline (JSON)\n"
               "  synth    out=DIR             write a deterministic synthetic shapes dataset\n"
               "  crops    data=... out=DIR    a classification dataset (ImageFolder) of the boxes' crops\n"
               "Keys: libreyolo cfg data (model= picks the family pipeline; imgsz, workers, batch, cache, seed).\n");
    return action.empty() ? 2 : 0;
  }
  if (wants_help(rest)) {
    fmt::print("libreyolo data {}\n\n{}", action, models::command_help(config::command_data));
    return 0;
  }
  if (action == "check") return run_data_check(rest);
  if (action == "synth") return run_data_synth(rest);
  if (action == "preview") return run_data_preview(rest);
  if (action == "bench") return run_data_bench(rest);
  if (action == "crops") return run_data_crops(rest);
  throw UsageError(fmt::format("unknown data action '{}': use check, preview, bench, synth or crops", action));
}

}  // namespace libreyolo::cli
