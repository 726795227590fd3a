// Validation as LibreYOLO runs it during training and in `libreyolo val`: rect batches of
// letterboxed images (square ones, stretched, for the DETRs), the model in eval mode, decode +
// class-aware multi-label NMS (a DETR's top-k queries), boxes back
// in original pixels, then COCO metrics against the split's labels (a COCO JSON's annotations as
// written, crowds and areas included).
#pragma once

#include "data/dataset.h"
#include "data/val_batches.h"
#include "eval/coco_eval.h"
#include "eval/pr_metrics.h"
#include "models/family.h"

#include <ATen/Tensor.h>
#include <c10/core/Device.h>

#include <functional>
#include <string>
#include <vector>

namespace libreyolo::eval {

// Per image [K, 6] (x1, y1, x2, y2, score, class) in network-input pixels, on the CPU: the
// family's own postprocess (a DETR's top-k queries), else decode + NMS. `input`: the network input
// the maps came from (its size). `extents`: NmsOptions::extents.
std::vector<at::Tensor> detect(const std::vector<at::Tensor>& maps, const models::Family& family, const at::Tensor& input,
                               double confidence, double iou, int max_detections, bool multi_label,
                               const at::Tensor& extents = {});

struct ValidatorOptions {
  const models::Family* family = nullptr;
  int batch_size = 16;
  int image_size = 640;
  double confidence = 0.001;
  double iou = 0.65;
  int max_detections = 300;       // NMS cap per image
  int coco_max_detections = 100;  // COCO maxDets cap of the metric (eval_max_det)
  int workers = 2;
  c10::Device device = c10::kCPU;
  double crop_pct = 0.875;  // classification: the centre crop's share of the resized image
};

// val_loss: the family's training loss on the validation batches. `forward_raw` gives the
// training-shaped maps (in eval mode), which the validator also turns into the eval maps.
struct ValidationLoss {
  std::function<std::vector<at::Tensor>(const at::Tensor&)> forward_raw;
  std::function<models::LossTerms(const std::vector<at::Tensor>&, const models::TargetBatch&)> loss;
  std::vector<std::string> names;  // the parts, in order
};

// Validation split over the ranks of a data-parallel run: rank `shard` of `shards` runs every
// shards-th batch of the plan, and `gather_rows` / `sum` (collectives) bring every rank's
// detections and loss sums together, so each rank gets the metrics of the whole split, equal to
// one process's.
struct DistributedValidation {
  int shard = 0;
  int shards = 1;
  std::function<at::Tensor(const at::Tensor&)> gather_rows;
  std::function<void(at::Tensor&)> sum;
};

// A validation's metrics, by results.csv column ("metrics/mAP50-95"), in the task's column order.
using Metrics = std::vector<std::pair<std::string, double>>;

struct Validation {
  // detection's: COCO mAP, P and R, the detections
  CocoResult coco;  // pycocotools' mAP
  PrMetrics pr;     // Ultralytics' P and R (at the confidence of the best mean F1) and curves
  std::vector<std::pair<std::string, double>> losses;  // with val_loss: "loss" then the parts, batch means
  std::vector<CocoBox> detections;  // original pixels; image = dataset index
  // a task whose validator computes its metrics/* columns itself (classification: top-1, ...)
  Metrics computed;
  std::int64_t images = 0, instances = 0;
  double seconds = 0;
};

// A task's validator (eval::Task::make_validator): the model over a split, its metrics.
class Validator {
 public:
  virtual ~Validator() = default;
  // `forward` runs the model (already in eval mode) on a network input.
  // With `loss`, the model runs through loss->forward_raw instead and the losses are averaged.
  virtual Validation run(const std::function<std::vector<at::Tensor>(const at::Tensor&)>& forward,
                         const ValidationLoss* loss = nullptr) const = 0;
  virtual const data::Dataset& dataset() const = 0;
  virtual void distribute(DistributedValidation distributed) = 0;
};

// Detection's.
class DetectionValidator final : public Validator {
 public:
  DetectionValidator(const data::DetectionDataset& dataset, ValidatorOptions options);
  Validation run(const std::function<std::vector<at::Tensor>(const at::Tensor&)>& forward,
                 const ValidationLoss* loss = nullptr) const override;
  const data::Dataset& dataset() const override { return dataset_; }
  void distribute(DistributedValidation distributed) override { distributed_ = std::move(distributed); }

 private:
  const data::DetectionDataset& dataset_;
  ValidatorOptions options_;
  std::vector<CocoBox> ground_truth_;          // what COCOeval measures against (crowds included)
  std::vector<CocoBox> counted_ground_truth_;  // without crowd regions
  std::vector<std::int64_t> image_ids_;
  data::RectBatchPlan plan_;  // the batches depend only on the image sizes: planned once
  DistributedValidation distributed_;
};

// Ultralytics' table: a header, "all" and one row per class with ground truth; P and R are
// Ultralytics' (pr_metrics.h), the mAPs COCO's.
std::string format_table(const Validation& validation, const std::vector<std::string>& names);

}  // namespace libreyolo::eval
