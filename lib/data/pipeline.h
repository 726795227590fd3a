// The training augmentation pipelines of the families, built from the resolved config:
//   yolo9 (Ultralytics v8_transforms): mosaic -> random perspective -> Beta mixup ->
//         multiplicative HSV -> flips; without mosaic: letterbox -> random perspective.
//   yolov5 (YOLOv5's LoadImagesAndLabels): yolo9's, but load_mosaic draws the three partners from
//         the whole dataset and shuffles the four tiles.
//   yolox (MosaicDetection + TrainTransform): mosaic -> random affine -> YOLOX mixup ->
//         additive HSV -> flip -> top-left fit; boxes under 1 px dropped.
//   detr  (LibreYOLO's RTDETRTrainTransform, no mosaic): additive HSV -> flips -> stretch to the
//         square; boxes under 1 px dropped.
//   dfine, deim (LibreYOLO's DetrTrainTransform): photometric distortion -> zoom-out -> IoU crop ->
//         sanitize (the strong stage, images with boxes only) -> flip -> stretch to the square.
// Each sample's draws derive from (seed, epoch, index).
#pragma once

#include "core/config.h"
#include "data/augment/geometry.h"
#include "data/dataset.h"
#include "data/recipe.h"
#include "data/sample.h"
#include "data/sample_random.h"

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace libreyolo::data {

// Which family's augmentation recipe a pipeline follows.

struct AugmentConfig {
  Recipe recipe = Recipe::yolo9;
  int image_size = 640;
  double mosaic = 1.0, mixup = 0.0;
  double hsv_prob = 1.0, hue = 0.015, saturation = 0.7, value = 0.4;
  double flip_lr = 0.5, flip_ud = 0.0;
  double degrees = 0.0, translate = 0.1, shear = 0.0, perspective = 0.0;
  double scale_low = 0.5, scale_high = 1.5;              // mosaic_scale
  double mixup_scale_low = 0.5, mixup_scale_high = 1.5;  // YOLOX mixup jitter
  int max_labels = 300;

  // The options' values, with the model family's `recipe` (models::Family::augment_recipe).
  static AugmentConfig from_config(const config::Config& config, Recipe recipe);
};

class TrainPipeline {
 public:
  TrainPipeline(const DetectionDataset& dataset, AugmentConfig augment, std::uint64_t seed);

  // The strong stage's switch (LibreYOLO's no_aug_epochs, and D-FINE's and DEIM's
  // aug_stop_epoch_ratio): mosaic and mixup, or D-FINE's photometric, zoom-out and crop, off.
  void set_mosaic_enabled(bool enabled) { mosaic_enabled_ = enabled; }
  bool mosaic_enabled() const { return mosaic_enabled_; }
  const AugmentConfig& config() const { return augment_; }
  // What the switch turns off, for the log: "mosaic and mixup", ...; empty: nothing (RT-DETR's).
  std::string_view strong_stage() const;

  // A square image_size x image_size sample with pixel boxes. Mosaic and mixup partners are
  // drawn from `pool` (the batch being built, like Ultralytics' buffer of recent images, so
  // their decodes are shared) when it holds at least 4 images, else (and always for YOLOv5's
  // recipe) from the whole dataset.
  Sample sample(std::size_t index, int epoch, std::span<const std::size_t> pool = {}) const;

 private:
  struct Draw {
    SampleRandom& random;
    std::span<const std::size_t> pool;  // empty: draw from the whole dataset
    std::size_t dataset_size;
    std::size_t partner();
  };
  Sample yolo9_sample(std::size_t index, Draw& draw) const;
  Sample yolo9_geometric(std::size_t index, Draw& draw, bool use_mosaic) const;
  Sample yolox_sample(std::size_t index, Draw& draw) const;
  Sample detr_sample(std::size_t index, Draw& draw) const;
  Sample dfine_sample(std::size_t index, Draw& draw) const;
  Sample mosaic_of(std::size_t index, Draw& draw) const;
  PiecedImage mosaic_pieces_of(std::size_t index, Draw& draw) const;

  const DetectionDataset& dataset_;
  AugmentConfig augment_;
  std::uint64_t seed_;
  bool mosaic_enabled_ = true;
};

}  // namespace libreyolo::data
