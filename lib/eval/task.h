// What a task brings, behind one interface: its dataset reader and `libreyolo data check` counts,
// the sample and batch types its loader moves, its validator and the metric columns it writes,
// its best-model metric, and what `predict` writes. The trainer, the loader, checkpoints, resume,
// data-parallel training, CUDA graphs and the profiler ask the task of the run (task_of(config):
// the `task=` key, LibreYOLO's and Ultralytics' name) and name none of its types but the aliases
// below. Detection (`task=detect`, detect_task.cpp) and classification (`task=classify`,
// classify_task.cpp); a new task adds an implementation beside them and its entry to tasks().
#pragma once

#include "core/config.h"
#include "data/dataset.h"
#include "data/dataset_yaml.h"
#include "data/batch_source.h"
#include "data/sample_pipeline.h"
#include "data/training_data.h"
#include "eval/validator.h"
#include "models/family.h"
#include "models/targets.h"

#include <ATen/Tensor.h>
#include <c10/core/Device.h>
#include <nlohmann/json.hpp>
#include <opencv2/core/mat.hpp>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace libreyolo::eval {

// The types a task's data moves in, named here once for the layers above: a dataset (the
// task's subclass: detection's boxes, classification's labels), a batch (images and the task's
// target rows, which the loader template, the trainer and the step runner move without reading)
// and the targets a loss takes (detection: boxes in padded slots; classification: a class per
// image). Each task brings its own sample type and collate (make_loader).
struct TaskTypes {
  using Dataset = data::Dataset;
  using Batch = data::Batch;
  using Targets = models::TargetBatch;
};

// `libreyolo data check` of one split: what training would see, as JSON and as lines for a reader.
struct SplitCheck {
  nlohmann::json json;
  std::string text;
  std::size_t images = 0;  // readable images
};

// Where a network input's pixels lie in the original image: original = (input - offset) / gain.
struct InputPlacement {
  double gain_x = 1, gain_y = 1;
  int left = 0, top = 0;
};

// What `predict` needs besides the model's maps.
struct PredictOptions {
  std::filesystem::path run_dir;
  std::vector<std::string> names;  // class names
  const models::Family* family = nullptr;
  double confidence = 0.25;
  double iou = 0.45;
  int max_detections = 300;
  bool save_txt = false;
  double crop_pct = 0.875;  // classification: the centre crop's share of the resized image
};

// `predict`'s outputs, one image at a time: detection draws the boxes on a copy of the image
// (<run>/<stem>.jpg) and with save_txt writes YOLO rows (<run>/labels/<stem>.txt).
class PredictWriter {
 public:
  virtual ~PredictWriter() = default;
  // The outputs of `image` (decoded, BGR) from the maps the model gave for `input` (the network
  // input, placed in the image as `placement` says); returns how many it found.
  virtual std::int64_t add(const std::filesystem::path& path, const cv::Mat& image, const std::vector<at::Tensor>& maps,
                           const at::Tensor& input, const InputPlacement& placement) = 0;
  virtual nlohmann::ordered_json outputs() const = 0;  // every output so far, for json=true
  virtual std::string_view unit() const = 0;   // what add() counts ("detections"), for the log
  // The log's line for the image add() took, from what it found ("12 detections"; a classifier's top-5).
  virtual std::string line(std::int64_t found) const;
  // After the last image: files written once (a classifier's predictions.json).
  virtual void finish() {}
  // The network input of `image` (decoded, BGR) at `size`, and where it lies in the image
  // (detection: letterboxed or stretched as the family validates; classification: the centre crop).
  virtual cv::Mat fit(const cv::Mat& image, int size, InputPlacement& placement) const = 0;
};

class Task {
 public:
  virtual ~Task() = default;
  virtual std::string_view name() const = 0;  // the task= value; checkpoints record it

  // Data. What `data=` names (detection: a data YAML or built-in name; classification: an
  // ImageFolder root or a YAML naming one), then the training split, read with the family's sample pipeline (data::load_training_data's
  // form), and another split for validation at the training split's size and resize rule.
  virtual data::DatasetSpec load_spec(const std::string& data) const = 0;
  virtual data::TrainingData load_training_data(const config::Config& config,
                                                std::shared_ptr<const data::SamplePipeline> steps) const = 0;
  virtual std::unique_ptr<TaskTypes::Dataset> load_split(const data::DatasetSpec& spec, const std::string& split, int workers,
                                                         int image_size, data::CacheMode cache,
                                                         data::ResizeRule resize) const = 0;
  virtual SplitCheck check_split(const data::DatasetSpec& spec, const std::string& split, int workers) const = 0;
  // The training batches: the task's loader over `data` (its samples, from the family's pipeline,
  // and its collate: data::SampleLoader over the task's sample type).
  virtual std::unique_ptr<data::BatchSource> make_loader(const data::TrainingData& data, data::LoaderOptions options) const = 0;
  // Whether an epoch drops its last, incomplete batch when the split holds at least one batch
  // (libreyolo 1.6.0's classification loader: drop_last, so an epoch is floor(N / batch) steps).
  virtual bool drops_incomplete_batch() const { return false; }
  // A batch's targets as the loss takes them, on `device`. `input`: the network input [B, 3, H, W]
  // the batch became (detection: boxes in its pixels); `slots`: the fixed label slots per image a
  // captured loss was built for (max_labels under cuda_graph_scope=loss and up; 0: as many as needed).
  virtual TaskTypes::Targets loss_targets(const at::Tensor& rows, const at::Tensor& input, std::int64_t slots,
                                          const c10::Device& device) const = 0;

  // Validation and metrics: results.csv's metrics/* columns in order, the best_metric the task
  // selects best.pt by unless told, a validation's metrics, its one-line summary for the log
  // ("mAP50: 0.7164, mAP50-95: 0.5453") and its table.
  virtual std::unique_ptr<Validator> make_validator(const TaskTypes::Dataset& dataset, ValidatorOptions options) const = 0;
  virtual std::span<const std::string_view> metric_names() const = 0;
  virtual std::string_view default_best_metric() const = 0;
  virtual Metrics metrics(const Validation& validation) const = 0;
  virtual std::string summary(const Validation& validation) const = 0;
  virtual std::string table(const Validation& validation, const std::vector<std::string>& names) const = 0;
  // The column best_metric= names: empty for the task's default, a column or its name without
  // "metrics/" in any case (map50 -> metrics/mAP50); UsageError naming the columns otherwise.
  std::string best_metric_column(std::string_view asked) const;
  // The value of one metric column (metric_names()); NaN for a name the task does not write.
  double metric(const Validation& validation, std::string_view name) const;
  // save_plots: the validation's plots under `dir` (detection: PR/F1 curves, the confusion matrix
  // and `samples` images with their labels and predictions); returns how many files it wrote.
  virtual int write_plots(const std::filesystem::path& dir, const Validation& validation, const std::vector<std::string>& names,
                          const TaskTypes::Dataset& dataset, int samples) const = 0;

  // `val save_json`: a validation's predictions in the form the task's tools read (detection:
  // COCO's results list, its image and category ids), with how many there are.
  virtual std::pair<nlohmann::json, std::size_t> predictions_json(const Validation& validation, const TaskTypes::Dataset& dataset,
                                                                  const data::DatasetSpec& spec) const = 0;

  // Prediction.
  virtual std::unique_ptr<PredictWriter> make_predict_writer(PredictOptions options) const = 0;
};

// The task `task=` names (UsageError for one that is not built), and a checkpoint's (ModelError).
const Task& task_of(const config::Config& config);
const Task& task_named(std::string_view name);
// Every task, in the order `task=` lists them (task.cpp), and each one's (its own file).
std::span<const Task* const> tasks();
const Task& detect_task();
const Task& classify_task();
// UsageError where the model (a checkpoint: models::LoadedModel::task) was trained for another
// task than the run's.
void check_model_task(std::string_view model_task, const Task& task, std::string_view model);

}  // namespace libreyolo::eval
