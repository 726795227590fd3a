// Detection (task=detect): YOLO-format or COCO JSON boxes, COCO mAP with Ultralytics' P and R,
// boxes drawn by `predict`.
#include "eval/task.h"

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/printable.h"
#include "data/augment/geometry.h"
#include "data/image_io.h"
#include "data/label_scan.h"
#include "data/loader.h"
#include "eval/plots.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <iterator>
#include <map>
#include <stdexcept>

namespace libreyolo::eval {

namespace {

constexpr auto kMetricNames = std::to_array<std::string_view>(
    {"metrics/mAP50-95", "metrics/mAP50", "metrics/mAP75", "metrics/precision", "metrics/recall"});

// Detection's own dataset, which this task's loads give (another task's is a logic error).
const data::DetectionDataset& boxes(const TaskTypes::Dataset& dataset) {
  if (const auto* detection = dynamic_cast<const data::DetectionDataset*>(&dataset)) return *detection;
  throw std::logic_error("task=detect was given another task's dataset");
}

int size_bucket(int long_side) {
  for (const int bound : {2560, 1280, 640, 320, 160}) {
    if (long_side >= bound) return bound;
  }
  return 0;
}

// Boxes on a copy of each image, YOLO rows with save_txt, and every detection for json=true.
class DetectionWriter final : public PredictWriter {
 public:
  explicit DetectionWriter(PredictOptions options) : options_(std::move(options)) {
    if (options_.save_txt) std::filesystem::create_directories(options_.run_dir / "labels");
  }

  std::int64_t add(const std::filesystem::path& path, const cv::Mat& image, const std::vector<at::Tensor>& maps,
                   const at::Tensor& input, const InputPlacement& p) override {
    const at::Tensor extents = options_.family->input_fit() == data::InputFit::letterbox_top_left
                                   ? at::tensor({image.cols * p.gain_x, image.rows * p.gain_y}, at::kDouble).view({1, 2})
                                   : at::Tensor();  // as validation: clipped to the image before NMS
    const at::Tensor d = detect(maps, *options_.family, input, options_.confidence, options_.iou, options_.max_detections,
                                false, extents)[0];
    const auto a = d.accessor<float, 2>();
    const auto& names = options_.names;
    cv::Mat drawn = image.clone();
    std::string txt;
    for (std::int64_t k = 0; k < d.size(0); ++k) {
      const auto map = [&](float v, int pad, double gain, int limit) { return std::clamp((v - pad) / gain, 0.0, static_cast<double>(limit)); };
      const double x1 = map(a[k][0], p.left, p.gain_x, image.cols), y1 = map(a[k][1], p.top, p.gain_y, image.rows);
      const double x2 = map(a[k][2], p.left, p.gain_x, image.cols), y2 = map(a[k][3], p.top, p.gain_y, image.rows);
      const int cls = static_cast<int>(a[k][5]);
      const float score = a[k][4];
      const std::string label = fmt::format("{} {:.2f}", cls < static_cast<int>(names.size()) ? names[cls] : std::to_string(cls), score);
      const cv::Scalar colour((37 * cls + 80) % 255, (17 * cls + 160) % 255, (91 * cls + 40) % 255);
      cv::rectangle(drawn, cv::Point(static_cast<int>(x1), static_cast<int>(y1)), cv::Point(static_cast<int>(x2), static_cast<int>(y2)), colour, 2);
      cv::putText(drawn, label, cv::Point(static_cast<int>(x1), std::max(12, static_cast<int>(y1) - 4)), cv::FONT_HERSHEY_SIMPLEX, 0.5, colour, 1);
      txt += fmt::format("{} {:.6f} {:.6f} {:.6f} {:.6f} {:.5f}\n", cls, (x1 + x2) / 2 / image.cols, (y1 + y2) / 2 / image.rows,
                         (x2 - x1) / image.cols, (y2 - y1) / image.rows, score);
      all_.push_back({{"image", path.string()}, {"class", cls}, {"name", names.at(static_cast<std::size_t>(std::min<int>(cls, names.size() - 1)))},
                      {"confidence", score}, {"box", {x1, y1, x2, y2}}});
    }
    const std::vector<std::uint8_t> encoded = data::encode_image(drawn, ".jpg", 95);
    write_file_atomically(options_.run_dir / (path.stem().string() + ".jpg"),
                          std::string_view(reinterpret_cast<const char*>(encoded.data()), encoded.size()));
    if (options_.save_txt) write_file_atomically(options_.run_dir / "labels" / (path.stem().string() + ".txt"), txt);
    return d.size(0);
  }

  nlohmann::ordered_json outputs() const override { return all_; }
  std::string_view unit() const override { return "detections"; }

  // letterbox to a stride-32 rectangle around the resized image, centred or (YOLOX, YOLOv7,
  // RTMDet) into the square's top-left corner, or (a DETR) stretch to the square
  cv::Mat fit(const cv::Mat& image, int size, InputPlacement& p) const override {
    cv::Mat boxed;
    const data::InputFit input_fit = options_.family->input_fit();
    if (input_fit == data::InputFit::stretch) {
      cv::resize(image, boxed, cv::Size(size, size), 0, 0, cv::INTER_LINEAR);
      p = {.gain_x = static_cast<double>(size) / image.cols, .gain_y = static_cast<double>(size) / image.rows};
    } else if (input_fit == data::InputFit::letterbox_top_left) {
      const data::LetterboxResult fitted = data::fit_top_left({.image = image, .boxes = {}}, cv::Size(size, size));
      boxed = fitted.sample.image;
      p = {.gain_x = fitted.ratio, .gain_y = fitted.ratio};
    } else {
      const double gain = std::min(static_cast<double>(size) / image.cols, static_cast<double>(size) / image.rows);
      cv::Mat resized;
      cv::resize(image, resized, cv::Size(std::max(1, static_cast<int>(std::round(image.cols * gain))),
                                          std::max(1, static_cast<int>(std::round(image.rows * gain)))),
                 0, 0, gain < 1 ? cv::INTER_AREA : cv::INTER_LINEAR);
      const int width = (resized.cols + 31) / 32 * 32, height = (resized.rows + 31) / 32 * 32;
      const int left = (width - resized.cols) / 2, top = (height - resized.rows) / 2;
      cv::copyMakeBorder(resized, boxed, top, height - resized.rows - top, left, width - resized.cols - left,
                         cv::BORDER_CONSTANT, cv::Scalar(114, 114, 114));
      p = {.gain_x = gain, .gain_y = gain, .left = left, .top = top};
    }
    return boxed;
  }

 private:
  PredictOptions options_;
  nlohmann::ordered_json all_ = nlohmann::ordered_json::array();
};

class DetectTask final : public Task {
 public:
  std::string_view name() const override { return "detect"; }

  data::DatasetSpec load_spec(const std::string& data) const override { return data::load_dataset_spec(data); }

  data::TrainingData load_training_data(const config::Config& config, std::shared_ptr<const data::SamplePipeline> steps) const override {
    return data::load_training_data(config, std::move(steps));
  }

  std::unique_ptr<TaskTypes::Dataset> load_split(const data::DatasetSpec& spec, const std::string& split, int workers,
                                                 int image_size, data::CacheMode cache, data::ResizeRule resize) const override {
    auto scan = data::scan_split(spec, split, workers);
    return std::make_unique<data::DetectionDataset>(std::move(scan.images), spec.class_count(), image_size, cache, resize);
  }

  // Images and instances per class, the long sides, and the scan's counts (corrupt, missing labels, ...).
  SplitCheck check_split(const data::DatasetSpec& spec, const std::string& split, int workers) const override {
    const data::ScanResult scan = data::read_split(spec, split, workers);
    std::vector<int> images_per_class(spec.names.size(), 0), instances_per_class(spec.names.size(), 0);
    std::map<int, int> long_sides;  // bucket lower bound -> images
    for (const auto& record : scan.images) {
      std::vector<bool> seen(spec.names.size(), false);
      for (const auto& box : record.boxes) {
        ++instances_per_class[box.cls];
        seen[box.cls] = true;
      }
      for (std::size_t c = 0; c < seen.size(); ++c) images_per_class[c] += seen[c] ? 1 : 0;
      ++long_sides[size_bucket(std::max(record.width, record.height))];
    }
    SplitCheck check;
    check.images = scan.images.size();
    auto out = std::back_inserter(check.text);
    fmt::format_to(out, "{}: {}{}\n", split, scan.summary(), scan.from_cache ? " (from cache)" : "");
    if (const auto& coco = scan.coco) {  // as pycocotools counts them
      fmt::format_to(out, "  {}: {} images, {} annotations ({} crowd), {} categories\n", scan.cache_file.filename().string(),
                     coco->images, coco->annotations, coco->crowd, coco->categories);
    }
    for (const auto& message : scan.messages) fmt::format_to(out, "  {}\n", message);
    fmt::format_to(out, "  {:>22} {:>10} {:>10}\n", "class", "images", "instances");
    nlohmann::json classes = nlohmann::json::object();
    for (std::size_t c = 0; c < spec.names.size(); ++c) {
      classes[spec.names[c]] = {{"images", images_per_class[c]}, {"instances", instances_per_class[c]}};
      if (instances_per_class[c] == 0) continue;
      fmt::format_to(out, "  {:>22} {:>10} {:>10}\n", printable(spec.names[c]), images_per_class[c], instances_per_class[c]);
    }
    fmt::format_to(out, "  image long side:");
    nlohmann::json histogram = nlohmann::json::object();
    for (const auto& [bucket, count] : long_sides) {
      fmt::format_to(out, " >={}px: {}", bucket, count);
      histogram[std::to_string(bucket)] = count;
    }
    fmt::format_to(out, "\n");
    check.json = {{"images", scan.images.size()}, {"backgrounds", scan.backgrounds}, {"corrupt", scan.corrupt},
                  {"missing_labels", scan.missing_labels}, {"duplicates_removed", scan.duplicates_removed},
                  {"messages", scan.messages}, {"classes", classes}, {"long_side_histogram", histogram}};
    if (const auto& coco = scan.coco) {
      check.json["coco"] = {{"file", scan.cache_file.string()}, {"images", coco->images}, {"annotations", coco->annotations},
                            {"crowd", coco->crowd}, {"categories", coco->categories}};
    }
    return check;
  }

  std::unique_ptr<data::BatchSource> make_loader(const data::TrainingData& data, data::LoaderOptions options) const override {
    const data::TrainPipeline* pipeline = data.detection_pipeline();
    return std::make_unique<data::Loader>(
        [pipeline](std::size_t index, int epoch, std::span<const std::size_t> batch) { return pipeline->sample(index, epoch, batch); },
        data.dataset->size(), std::move(options));
  }
  TaskTypes::Targets loss_targets(const at::Tensor& rows, const at::Tensor& input, std::int64_t slots,
                                  const c10::Device& device) const override {
    return models::pad_targets(rows, input.size(0), input.size(3), input.size(2), slots).to(device);
  }

  std::unique_ptr<Validator> make_validator(const TaskTypes::Dataset& dataset, ValidatorOptions options) const override {
    return std::make_unique<DetectionValidator>(boxes(dataset), std::move(options));
  }
  std::span<const std::string_view> metric_names() const override { return kMetricNames; }
  std::string_view default_best_metric() const override { return kMetricNames[0]; }
  Metrics metrics(const Validation& v) const override {
    return {{"metrics/mAP50-95", v.coco.map50_95()}, {"metrics/mAP50", v.coco.map50()}, {"metrics/mAP75", v.coco.map75()},
            {"metrics/precision", v.pr.mean_precision}, {"metrics/recall", v.pr.mean_recall}};
  }
  std::string summary(const Validation& v) const override {
    return fmt::format("mAP50: {:.4f}, mAP50-95: {:.4f}", v.coco.map50(), v.coco.map50_95());
  }
  std::string table(const Validation& validation, const std::vector<std::string>& names) const override {
    return format_table(validation, names);
  }
  int write_plots(const std::filesystem::path& dir, const Validation& validation, const std::vector<std::string>& names,
                  const TaskTypes::Dataset& dataset, int samples) const override {
    return write_validation_plots(dir, validation, names, boxes(dataset), samples);
  }

  std::pair<nlohmann::json, std::size_t> predictions_json(const Validation& validation, const TaskTypes::Dataset& dataset,
                                                          const data::DatasetSpec& spec) const override {
    nlohmann::json predictions = nlohmann::json::array();
    for (const auto& d : validation.detections) {
      const auto& record = boxes(dataset).record(static_cast<std::size_t>(d.image));
      // COCO JSON: its image and category ids; YOLO labels: a numeric file stem, as LibreYOLO writes it
      const std::string stem = record.image.stem().string();
      const bool numeric = !stem.empty() && stem.size() < 19 && std::all_of(stem.begin(), stem.end(), ::isdigit);
      const nlohmann::json image_id = record.source_id >= 0 ? nlohmann::json(record.source_id)
                                      : numeric             ? nlohmann::json(std::stoll(stem))
                                                            : nlohmann::json(stem);
      // unrounded, as LibreYOLO writes them: COCOeval then sees the very detections, and tied scores order as ours
      predictions.push_back({{"image_id", image_id}, {"category_id", spec.category_id(d.category)},
                             {"bbox", {d.x, d.y, d.w, d.h}}, {"score", d.score}});
    }
    return {std::move(predictions), validation.detections.size()};
  }

  std::unique_ptr<PredictWriter> make_predict_writer(PredictOptions options) const override {
    return std::make_unique<DetectionWriter>(std::move(options));
  }
};

}  // namespace

const Task& detect_task() {
  static const DetectTask task;
  return task;
}

}  // namespace libreyolo::eval
