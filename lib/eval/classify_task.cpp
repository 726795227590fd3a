// Classification (task=classify): ImageFolder datasets, libreyolo 1.6.0's views (RandomResizedCrop
// and flips for training; resize, centre crop for validation), top-1/top-5 and the macro P/R/F1 of
// its validator, the top-5 classes from `predict`.
#include "eval/task.h"

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/log.h"
#include "core/parallel.h"
#include "core/printable.h"
#include "data/classify_dataset.h"
#include "data/image_folder.h"
#include "data/image_io.h"
#include "data/loader.h"
#include "eval/classify_metrics.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <fmt/format.h>
#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <iterator>
#include <numeric>
#include <stdexcept>

namespace libreyolo::eval {

namespace {

constexpr auto kMetricNames = std::to_array<std::string_view>(
    {"metrics/accuracy_top1", "metrics/accuracy_top5", "metrics/precision", "metrics/recall", "metrics/f1"});

const data::ClassifyDataset& labelled(const TaskTypes::Dataset& dataset) {
  if (const auto* classify = dynamic_cast<const data::ClassifyDataset*>(&dataset)) return *classify;
  throw std::logic_error("task=classify was given another task's dataset");
}

// The split's folder under the spec's root, scanned against the train split's classes.
data::ImageFolderSplit scan(const data::DatasetSpec& spec, const std::string& split) {
  const auto& sources = spec.split(split);
  if (sources.empty()) throw DataError(fmt::format("{}: no '{}' folder (root/{}/<class>/...)", spec.root.string(), split, split));
  auto scanned = data::scan_image_folder(spec.root, sources.front().filename().string(), spec.names);
  scanned.split = split;
  return scanned;
}

// The split's images whose header cannot be read, each named in a warning and left out (as
// detection's scan skips a corrupt image), so that training does not stop at one mid-epoch.
// DataError when a class is left without an image.
data::ImageFolderSplit readable(data::ImageFolderSplit split, int workers) {
  std::vector<char> bad(split.images.size(), 0);
  std::vector<std::string> why(split.images.size());
  parallel_for(split.images.size(), std::max(1, workers), [&](std::size_t i) {
    try {
      (void)data::read_image_info(split.images[i].path);
    } catch (const data::CorruptImage& error) {
      bad[i] = 1;
      why[i] = error.what();
    }
  });
  std::vector<data::ClassImage> kept;
  for (std::size_t i = 0; i < split.images.size(); ++i) {
    if (bad[i]) {
      log::warn("{}: {}; skipped", split.images[i].path.string(), why[i]);
    } else {
      kept.push_back(split.images[i]);
    }
  }
  split.images = std::move(kept);
  const auto counts = split.per_class();
  for (std::size_t c = 0; c < counts.size(); ++c) {
    if (counts[c] == 0) {
      throw DataError(fmt::format("{}: no readable image in it; add images or remove the class from every split",
                                  (split.folder / split.classes[c]).string()));
    }
  }
  return split;
}

class ClassifyValidator final : public Validator {
 public:
  ClassifyValidator(const data::ClassifyDataset& dataset, ValidatorOptions options) : dataset_(dataset), options_(std::move(options)) {}

  Validation run(const std::function<std::vector<at::Tensor>(const at::Tensor&)>& forward, const ValidationLoss* loss) const override {
    const auto start = std::chrono::steady_clock::now();
    at::NoGradGuard no_grad;
    ClassifyMetrics metrics(dataset_.class_count());
    std::vector<double> loss_sums(loss ? loss->names.size() + 1 : 0, 0.0);
    const auto batch = static_cast<std::size_t>(std::max(1, options_.batch_size));
    const std::size_t batches = (dataset_.size() + batch - 1) / batch;
    const auto shards = static_cast<std::size_t>(std::max(1, distributed_.shards));
    for (std::size_t b = static_cast<std::size_t>(distributed_.shard); b < batches; b += shards) {
      const std::size_t first = b * batch, count = std::min(batch, dataset_.size() - first);
      std::vector<cv::Mat> views(count);
      parallel_for(count, options_.workers, [&](std::size_t i) {
        views[i] = data::eval_view(dataset_.decode(first + i), options_.image_size, options_.crop_pct);
      });
      const at::Tensor images = data::stack_images(static_cast<int>(count), [&](int i) -> const cv::Mat& { return views[i]; }, false);
      std::vector<std::int64_t> label_list(count);
      for (std::size_t i = 0; i < count; ++i) label_list[i] = dataset_.label(first + i);
      const at::Tensor labels = at::tensor(label_list, at::kLong);
      const at::Tensor input = options_.family->network_input(images, options_.device);
      std::vector<at::Tensor> maps;
      if (loss) {
        const auto raw = loss->forward_raw(input);
        const models::LossTerms terms = loss->loss(raw, models::TargetBatch::of_classes(labels).to(options_.device));
        loss_sums[0] += terms.total.item<double>();
        for (std::size_t k = 0; k < loss->names.size(); ++k) loss_sums[k + 1] += terms.part(loss->names[k]).item<double>();
        maps = options_.family->eval_maps(raw);
      } else {
        maps = forward(input);
      }
      metrics.update(maps.at(0), labels);
    }
    if (shards > 1) {
      at::Tensor counts = metrics.counts();
      distributed_.sum(counts);
      metrics.set_counts(counts);
      if (loss) {
        at::Tensor sums = at::tensor(loss_sums, at::kDouble);
        distributed_.sum(sums);
        std::copy(sums.data_ptr<double>(), sums.data_ptr<double>() + sums.numel(), loss_sums.begin());
      }
    }
    Validation out;
    const auto macro = metrics.macro();
    out.computed = {{"metrics/accuracy_top1", metrics.top1()}, {"metrics/accuracy_top5", metrics.top5()},
                    {"metrics/precision", macro.precision}, {"metrics/recall", macro.recall}, {"metrics/f1", macro.f1}};
    if (loss && batches > 0) {
      out.losses.emplace_back("loss", loss_sums[0] / static_cast<double>(batches));
      for (std::size_t k = 0; k < loss->names.size(); ++k) {
        out.losses.emplace_back(loss->names[k], loss_sums[k + 1] / static_cast<double>(batches));
      }
    }
    out.images = metrics.total();
    out.instances = metrics.total();
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return out;
  }
  const data::Dataset& dataset() const override { return dataset_; }
  void distribute(DistributedValidation distributed) override { distributed_ = std::move(distributed); }

 private:
  const data::ClassifyDataset& dataset_;
  ValidatorOptions options_;
  DistributedValidation distributed_;
};

// The top-5 classes per image (LibreYOLO's Results.summary: name, class, confidence to 5
// decimals), drawn on a copy of the image, and predictions.json at the end.
class ClassificationWriter final : public PredictWriter {
 public:
  explicit ClassificationWriter(PredictOptions options) : options_(std::move(options)) {}

  cv::Mat fit(const cv::Mat& image, int size, InputPlacement& placement) const override {
    data::CropPlacement crop;
    cv::Mat view = data::eval_view(image, size, options_.crop_pct, &crop);
    placement = {.gain_x = crop.gain_x, .gain_y = crop.gain_y, .left = -crop.left, .top = -crop.top};
    return view;
  }

  std::int64_t add(const std::filesystem::path& path, const cv::Mat& image, const std::vector<at::Tensor>& maps, const at::Tensor&,
                   const InputPlacement&) override {
    const at::Tensor probabilities = maps.at(0).detach().to(at::kCPU, at::kFloat).reshape({-1}).softmax(0);
    const std::int64_t k = std::min<std::int64_t>(5, probabilities.numel());
    const auto [values, indices] = probabilities.topk(k);
    nlohmann::ordered_json top = nlohmann::ordered_json::array();
    std::string text;
    cv::Mat drawn = image.clone();
    for (std::int64_t i = 0; i < k; ++i) {
      const auto cls = indices[i].item<std::int64_t>();
      const double confidence = values[i].item<double>();
      const std::string& name = cls < static_cast<std::int64_t>(options_.names.size()) ? options_.names[static_cast<std::size_t>(cls)]
                                                                                         : std::to_string(cls);
      top.push_back({{"name", name}, {"class", cls}, {"confidence", std::round(confidence * 1e5) / 1e5}});
      text += fmt::format("{}{} {:.4f}", text.empty() ? "" : ", ", printable(name), confidence);
      cv::putText(drawn, fmt::format("{} {:.2f}", name, confidence), cv::Point(8, 24 + 22 * static_cast<int>(i)),
                  cv::FONT_HERSHEY_SIMPLEX, 0.6, cv::Scalar(255, 255, 255), 2);
    }
    last_ = text;
    all_.push_back(nlohmann::ordered_json{{"path", path.string()}, {"original_shape", {image.rows, image.cols}}, {"classification", top.at(0)}, {"top5", top}});
    const std::vector<std::uint8_t> encoded = data::encode_image(drawn, ".jpg", 95);
    write_file_atomically(options_.run_dir / (path.stem().string() + ".jpg"),
                          std::string_view(reinterpret_cast<const char*>(encoded.data()), encoded.size()));
    return 1;
  }
  std::string line(std::int64_t) const override { return last_; }
  void finish() override { write_file_atomically(options_.run_dir / "predictions.json", all_.dump(1)); }
  nlohmann::ordered_json outputs() const override { return all_; }
  std::string_view unit() const override { return "classifications"; }

 private:
  PredictOptions options_;
  nlohmann::ordered_json all_ = nlohmann::ordered_json::array();
  std::string last_;
};

class ClassifyTask final : public Task {
 public:
  std::string_view name() const override { return "classify"; }

  data::DatasetSpec load_spec(const std::string& data) const override {
    if (data.empty()) throw UsageError("data= is required: an ImageFolder root (root/train/<class>/*.jpg, root/val/<class>/...)");
    return data::image_folder_spec(data);
  }

  data::TrainingData load_training_data(const config::Config& config, std::shared_ptr<const data::SamplePipeline>) const override {
    refuse_unbuilt_options(config);
    data::TrainingData data;
    data.spec = load_spec(config.get_text("data"));
    const auto augment = data::ClassifyAugment::from_config(config);
    auto split = readable(scan(data.spec, "train"), static_cast<int>(config.get_int("workers")));
    log::info("train: {} images in {} classes ({})", split.images.size(), split.classes.size(), split.folder.string());
    auto dataset = std::make_unique<data::ClassifyDataset>(std::move(split), augment.image_size);
    data.pipeline = std::make_unique<data::ClassifyPipeline>(*dataset, augment, static_cast<std::uint64_t>(config.get_int("seed")));
    data.dataset = std::move(dataset);
    return data;
  }

  std::unique_ptr<TaskTypes::Dataset> load_split(const data::DatasetSpec& spec, const std::string& split, int workers, int image_size,
                                                 data::CacheMode, data::ResizeRule) const override {
    auto scanned = readable(scan(spec, split), workers);
    log::info("{}: {} images in {} classes ({})", split, scanned.images.size(), scanned.classes.size(), scanned.folder.string());
    return std::make_unique<data::ClassifyDataset>(std::move(scanned), image_size);
  }

  // Images per class, and every image whose header cannot be read.
  SplitCheck check_split(const data::DatasetSpec& spec, const std::string& split, int workers) const override {
    const data::ImageFolderSplit scanned = scan(spec, split);
    std::vector<std::string> unreadable(scanned.images.size());
    parallel_for(scanned.images.size(), std::max(1, workers), [&](std::size_t i) {
      try {
        (void)data::read_image_info(scanned.images[i].path);
      } catch (const data::CorruptImage& error) {
        unreadable[i] = fmt::format("{}: {}", scanned.images[i].path.string(), error.what());
      }
    });
    std::erase(unreadable, std::string());
    const auto counts = scanned.per_class();
    SplitCheck check;
    check.images = scanned.images.size() - unreadable.size();
    auto out = std::back_inserter(check.text);
    fmt::format_to(out, "{}: {} images in {} classes ({}){}\n", split, scanned.images.size(), scanned.classes.size(),
                   scanned.folder.string(), unreadable.empty() ? "" : fmt::format(", {} unreadable", unreadable.size()));
    for (const auto& message : unreadable) fmt::format_to(out, "  {}\n", message);
    fmt::format_to(out, "  {:>22} {:>10}\n", "class", "images");
    nlohmann::json classes = nlohmann::json::object();
    for (std::size_t c = 0; c < scanned.classes.size(); ++c) {
      classes[scanned.classes[c]] = {{"images", counts[c]}};
      fmt::format_to(out, "  {:>22} {:>10}\n", printable(scanned.classes[c]), counts[c]);
    }
    check.json = {{"images", scanned.images.size()}, {"corrupt", unreadable.size()}, {"messages", unreadable},
                  {"folder", scanned.folder.string()}, {"classes", classes}};
    return check;
  }

  std::unique_ptr<data::BatchSource> make_loader(const data::TrainingData& data, data::LoaderOptions options) const override {
    const auto* pipeline = dynamic_cast<const data::ClassifyPipeline*>(data.pipeline.get());
    if (!pipeline) throw std::logic_error("task=classify was given another task's training data");
    return std::make_unique<data::SampleLoader<data::ClassifySample>>(
        [pipeline](std::size_t index, int epoch, std::span<const std::size_t>) { return pipeline->sample(index, epoch); },
        data::collate_classify, data.dataset->size(), std::move(options));
  }
  bool drops_incomplete_batch() const override { return true; }
  TaskTypes::Targets loss_targets(const at::Tensor& rows, const at::Tensor&, std::int64_t, const c10::Device& device) const override {
    return models::TargetBatch::of_classes(rows.to(at::kLong)).to(device);
  }

  std::unique_ptr<Validator> make_validator(const TaskTypes::Dataset& dataset, ValidatorOptions options) const override {
    return std::make_unique<ClassifyValidator>(labelled(dataset), std::move(options));
  }
  std::span<const std::string_view> metric_names() const override { return kMetricNames; }
  std::string_view default_best_metric() const override { return kMetricNames[0]; }
  Metrics metrics(const Validation& v) const override { return v.computed; }
  std::string summary(const Validation& v) const override {
    return fmt::format("top1: {:.4f}, top5: {:.4f}", metric(v, kMetricNames[0]), metric(v, kMetricNames[1]));
  }
  // libreyolo 1.6.0's block (ClassifyValidator's verbose print)
  std::string table(const Validation& v, const std::vector<std::string>&) const override {
    const std::string rule(50, '=');
    return fmt::format("{0}\nClassification Validation Results\n{0}\n  top-1 accuracy: {1:.4f}\n  top-5 accuracy: {2:.4f}\n"
                       "  macro precision: {3:.4f}  recall: {4:.4f}  f1: {5:.4f}\n  images: {6}\n{0}\n",
                       rule, metric(v, kMetricNames[0]), metric(v, kMetricNames[1]), metric(v, kMetricNames[2]),
                       metric(v, kMetricNames[3]), metric(v, kMetricNames[4]), v.images);
  }
  int write_plots(const std::filesystem::path&, const Validation&, const std::vector<std::string>&, const TaskTypes::Dataset&,
                  int) const override {
    log::info("save_plots: classification has no plots yet (its metrics are in results.csv)");
    return 0;
  }
  std::pair<nlohmann::json, std::size_t> predictions_json(const Validation&, const TaskTypes::Dataset&,
                                                          const data::DatasetSpec&) const override {
    throw UsageError("save_json=true: COCO-format predictions are detection's; `libreyolo predict` writes a classifier's "
                     "top-5 per image (predictions.json)");
  }
  std::unique_ptr<PredictWriter> make_predict_writer(PredictOptions options) const override {
    return std::make_unique<ClassificationWriter>(std::move(options));
  }

 private:
  // LibreYOLO's optional classification augmentations not built here: refused with what to do.
  static void refuse_unbuilt_options(const config::Config& config) {
    const auto refuse = [](std::string_view key, const auto& value) {
      throw UsageError(fmt::format("{}={}: not built for classification yet (libreyolo 1.6.0's option); leave it at its "
                                   "default to train with RandomResizedCrop and flips", key, value));
    };
    for (const char* key : {"mixup", "cutmix", "erasing"}) {
      if (config.get_real(key) > 0) refuse(key, config.get_real(key));
    }
    if (!config.is_none("auto_augment")) refuse("auto_augment", config.get_text("auto_augment"));
    if (config.get_bool("single_cls")) throw UsageError("single_cls=true merges detection classes; a classifier needs its classes");
  }
};

}  // namespace

const Task& classify_task() {
  static const ClassifyTask task;
  return task;
}

}  // namespace libreyolo::eval
