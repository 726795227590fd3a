// `libreyolo predict model=... source=image|folder`: the model on each image, its outputs written
// by the task (eval::PredictWriter; detection: boxes drawn on <run>/<name>.jpg and, with save_txt,
// YOLO rows "class cx cy w h conf" normalised to the image in labels/<name>.txt).
#include "commands.h"
#include "core/atomic_file.h"
#include "core/config.h"
#include "core/option_help.h"
#include "models/family.h"
#include "core/error.h"
#include "core/log.h"
#include "core/run_dir.h"
#include "data/augment/geometry.h"
#include "data/dataset_yaml.h"
#include "data/image_io.h"
#include "eval/task.h"
#include "models/checkpoint.h"
#include "train/trainer.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <fmt/core.h>
#include <nlohmann/json.hpp>
#include <opencv2/imgproc.hpp>

#include <chrono>
#include <cstring>
#include <filesystem>

namespace libreyolo::cli {

int run_predict(const Arguments& arguments) {
  if (wants_help(arguments)) {
    fmt::print("{}", models::command_help(config::command_predict));
    return 0;
  }
  const auto config = models::parse_arguments(config::command_predict, arguments);
  log::set_quiet(config.get_bool("quiet"));
  const std::string source = config.get_text("source");
  if (source.empty()) throw UsageError("source= is required: libreyolo predict model=best.pt source=image.jpg|folder");
  if (!std::filesystem::exists(source)) throw DataError(fmt::format("source={}: no such file or folder", source));
  const auto images = data::list_images({std::filesystem::path(source)}, "source");
  if (images.empty()) throw DataError(fmt::format("source={}: no images found", source));
  auto loaded = models::load_model(config.get_text("model"), static_cast<int>(config.get_int("nc")));
  const eval::Task& task = eval::task_of(config);
  eval::check_model_task(loaded.task, task, config.get_text("model"));
  auto& model = loaded.model;
  const models::Family& family = models::family(loaded.name.family);
  const c10::Device device = train::resolve_device(config.get_text("device"));
  model.module->to(device);
  model.module->eval();
  const int size = !config.user_provided("imgsz") && loaded.image_size > 0
                       ? loaded.image_size : config.get_image_size("imgsz").height;
  const double conf = config.is_none("conf") ? 0.25 : config.get_real("conf");
  const double iou = config.is_none("iou") ? 0.45 : config.get_real("iou");
  const std::vector<std::string> names = loaded.names.empty() ? models::default_class_names(loaded.class_count) : loaded.names;
  const std::string project = config.source("project") == config::Source::table_default ? "runs/predict" : config.get_text("project");
  const auto run_dir = create_run_dir(project, config.get_text("name"), config.get_bool("exist_ok"));
  const auto writer = task.make_predict_writer({.run_dir = run_dir, .names = names, .family = &family, .confidence = conf,
                                                .iou = iou, .max_detections = static_cast<int>(config.get_int("max_det")),
                                                .save_txt = config.get_bool("save_txt"),
                                                .crop_pct = config.get_real("crop_pct")});
  at::NoGradGuard no_grad;
  std::int64_t total = 0;
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> skipped;  // unreadable files: named, and the others go on
  for (const auto& path : images) {
    cv::Mat image;
    const auto skip = [&](const std::exception& error) {
      log::warn("skipped {}: {}", path.string(), error.what());
      skipped.push_back(path.string());
    };
    try {
      image = data::decode_image(path);
    } catch (const data::CorruptImage& error) {
      skip(error);
      continue;
    } catch (const DataError& error) {
      skip(error);
      continue;
    }
    eval::InputPlacement placement;
    const cv::Mat boxed = writer->fit(image, size, placement);
    at::Tensor input = at::from_blob(boxed.data, {1, boxed.rows, boxed.cols, 3}, at::kByte).permute({0, 3, 1, 2}).flip(1).contiguous();
    const at::Tensor network_input = family.network_input(input, device);
    const auto maps = model.forward(network_input);
    const std::int64_t found = writer->add(path, image, maps, network_input, placement);
    total += found;
    log::info("{}: {}", path.filename().string(), writer->line(found));
  }
  writer->finish();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (skipped.size() == images.size()) {
    throw DataError(fmt::format("source={}: none of the {} images could be read (the first: {})", source, images.size(), skipped.front()));
  }
  log::info("{} images, {} {} in {:.2f}s; results saved to {}{}", images.size() - skipped.size(), total, writer->unit(), seconds,
            run_dir.string(), skipped.empty() ? "" : fmt::format(" ({} unreadable skipped)", skipped.size()));
  if (config.get_bool("json")) {
    fmt::print("{}\n", nlohmann::ordered_json{{"save_dir", run_dir.string()}, {std::string(writer->unit()), writer->outputs()}, {"skipped", skipped}}.dump());
  }
  return 0;
}

}  // namespace libreyolo::cli
