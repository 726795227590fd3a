// `libreyolo predict model=... source=image|folder`: detections drawn on each image
// (runs/predict/exp/<name>.jpg) and, with save_txt, YOLO-format rows "class cx cy w h conf"
// normalised to the image (labels/<name>.txt).
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
#include "eval/validator.h"
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
    fmt::print("{}", config::format_command_help(config::command_predict, models::family_defaults_table()));
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
  auto& model = loaded.model;
  const models::Family& family = models::family(loaded.name.family);
  const c10::Device device = train::resolve_device(config.get_text("device"));
  model.module->to(device);
  model.module->eval();
  const int size = config.source("imgsz") == config::Source::table_default && loaded.image_size > 0
                       ? loaded.image_size : config.get_image_size("imgsz").height;
  const double conf = config.is_none("conf") ? 0.25 : config.get_real("conf");
  const double iou = config.is_none("iou") ? 0.45 : config.get_real("iou");
  const std::vector<std::string> names = loaded.names.empty() ? models::default_class_names(loaded.class_count) : loaded.names;
  const std::string project = config.source("project") == config::Source::table_default ? "runs/predict" : config.get_text("project");
  const auto run_dir = create_run_dir(project, config.get_text("name"), config.get_bool("exist_ok"));
  const bool save_txt = config.get_bool("save_txt");
  if (save_txt) std::filesystem::create_directories(run_dir / "labels");
  at::NoGradGuard no_grad;
  nlohmann::json all = nlohmann::json::array();
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
    // letterbox to a stride-32 rectangle around the resized image, into the square's top-left
    // corner (YOLOX, YOLOv7, RTMDet), or (a DETR) stretch to the square
    double gain_x = 1, gain_y = 1;
    int left = 0, top = 0;
    cv::Mat boxed;
    if (family.input_fit() == data::InputFit::stretch) {
      cv::resize(image, boxed, cv::Size(size, size), 0, 0, cv::INTER_LINEAR);
      gain_x = static_cast<double>(size) / image.cols;
      gain_y = static_cast<double>(size) / image.rows;
    } else if (family.input_fit() == data::InputFit::letterbox_top_left) {
      const data::LetterboxResult fitted = data::fit_top_left({.image = image, .boxes = {}}, cv::Size(size, size));
      boxed = fitted.sample.image;
      gain_x = gain_y = fitted.ratio;
    } else {
      const double gain = std::min(static_cast<double>(size) / image.cols, static_cast<double>(size) / image.rows);
      cv::Mat resized;
      cv::resize(image, resized, cv::Size(std::max(1, static_cast<int>(std::round(image.cols * gain))),
                                          std::max(1, static_cast<int>(std::round(image.rows * gain)))),
                 0, 0, gain < 1 ? cv::INTER_AREA : cv::INTER_LINEAR);
      const int width = (resized.cols + 31) / 32 * 32, height = (resized.rows + 31) / 32 * 32;
      left = (width - resized.cols) / 2;
      top = (height - resized.rows) / 2;
      cv::copyMakeBorder(resized, boxed, top, height - resized.rows - top, left, width - resized.cols - left,
                         cv::BORDER_CONSTANT, cv::Scalar(114, 114, 114));
      gain_x = gain_y = gain;
    }
    at::Tensor input = at::from_blob(boxed.data, {1, boxed.rows, boxed.cols, 3}, at::kByte).permute({0, 3, 1, 2}).flip(1).contiguous();
    const at::Tensor network_input = family.network_input(input, device);
    const auto maps = model.forward(network_input);
    const at::Tensor extents = family.input_fit() == data::InputFit::letterbox_top_left
                                   ? at::tensor({image.cols * gain_x, image.rows * gain_y}, at::kDouble).view({1, 2})
                                   : at::Tensor();  // as validation: clipped to the image before NMS
    const at::Tensor d =
        eval::detect(maps, family, network_input, conf, iou, static_cast<int>(config.get_int("max_det")), false, extents)[0];
    const auto a = d.accessor<float, 2>();
    cv::Mat drawn = image.clone();
    std::string txt;
    for (std::int64_t k = 0; k < d.size(0); ++k) {
      const auto map = [&](float v, int pad, double gain, int limit) {
        return std::clamp((v - pad) / gain, 0.0, static_cast<double>(limit));
      };
      const double x1 = map(a[k][0], left, gain_x, image.cols), y1 = map(a[k][1], top, gain_y, image.rows);
      const double x2 = map(a[k][2], left, gain_x, image.cols), y2 = map(a[k][3], top, gain_y, image.rows);
      const int cls = static_cast<int>(a[k][5]);
      const float score = a[k][4];
      const std::string label = fmt::format("{} {:.2f}", cls < static_cast<int>(names.size()) ? names[cls] : std::to_string(cls), score);
      const cv::Scalar colour((37 * cls + 80) % 255, (17 * cls + 160) % 255, (91 * cls + 40) % 255);
      cv::rectangle(drawn, cv::Point(static_cast<int>(x1), static_cast<int>(y1)), cv::Point(static_cast<int>(x2), static_cast<int>(y2)), colour, 2);
      cv::putText(drawn, label, cv::Point(static_cast<int>(x1), std::max(12, static_cast<int>(y1) - 4)), cv::FONT_HERSHEY_SIMPLEX, 0.5, colour, 1);
      txt += fmt::format("{} {:.6f} {:.6f} {:.6f} {:.6f} {:.5f}\n", cls, (x1 + x2) / 2 / image.cols, (y1 + y2) / 2 / image.rows,
                         (x2 - x1) / image.cols, (y2 - y1) / image.rows, score);
      all.push_back({{"image", path.string()}, {"class", cls}, {"name", names.at(static_cast<std::size_t>(std::min<int>(cls, names.size() - 1)))},
                     {"confidence", score}, {"box", {x1, y1, x2, y2}}});
    }
    total += d.size(0);
    const std::vector<std::uint8_t> encoded = data::encode_image(drawn, ".jpg", 95);
    write_file_atomically(run_dir / (path.stem().string() + ".jpg"),
                          std::string_view(reinterpret_cast<const char*>(encoded.data()), encoded.size()));
    if (save_txt) write_file_atomically(run_dir / "labels" / (path.stem().string() + ".txt"), txt);
    log::info("{}: {} detections", path.filename().string(), d.size(0));
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (skipped.size() == images.size()) {
    throw DataError(fmt::format("source={}: none of the {} images could be read (the first: {})", source, images.size(), skipped.front()));
  }
  log::info("{} images, {} detections in {:.2f}s; results saved to {}{}", images.size() - skipped.size(), total, seconds,
            run_dir.string(), skipped.empty() ? "" : fmt::format(" ({} unreadable skipped)", skipped.size()));
  if (config.get_bool("json")) {
    fmt::print("{}\n", nlohmann::json{{"save_dir", run_dir.string()}, {"detections", all}, {"skipped", skipped}}.dump());
  }
  return 0;
}

}  // namespace libreyolo::cli
