// The interface between the loader and a model family's training augmentation: a SamplePipeline
// turns one dataset image (and the partners it draws) into one square training sample. The data
// layer offers the blocks (data/augment/: mosaic, mixups, affine and perspective warps, HSV,
// flips, the SSD-style distort/zoom/crop, letterbox, stretch, ...) and knows no family; each family
// composes its pipeline in its own folder (models::Family::sample_pipeline) and the loader's
// TrainPipeline runs it with each sample's random draws.
#pragma once

#include "core/config.h"
#include "data/augment/geometry.h"
#include "data/dataset.h"
#include "data/sample.h"
#include "data/sample_random.h"

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

namespace libreyolo::data {

// The augmentation options' values (core/option_table.cpp's keys), as the blocks take them.
struct AugmentConfig {
  int image_size = 640;
  double mosaic = 1.0, mixup = 0.0;
  double hsv_prob = 1.0, hue = 0.015, saturation = 0.7, value = 0.4;
  double flip_lr = 0.5, flip_ud = 0.0;
  double degrees = 0.0, translate = 0.1, shear = 0.0, perspective = 0.0;
  double scale_low = 0.5, scale_high = 1.5;              // mosaic_scale
  double mixup_scale_low = 0.5, mixup_scale_high = 1.5;  // mixup_scale (the jittered paste's)
  int max_labels = 300;

  static AugmentConfig from_config(const config::Config& config);
};

// What one sample draws from: the dataset, the options, this sample's random stream (derived from
// seed, epoch and index), where partners come from, and whether the strong stage is on.
struct SampleDraw {
  const DetectionDataset& dataset;
  const AugmentConfig& augment;
  SampleRandom& random;
  std::span<const std::size_t> pool;  // partners are drawn from these images; empty: the whole dataset
  bool strong = true;                 // the strong stage (mosaic and mixup, ...) is on
  std::size_t partner();              // a partner image's index, drawn from `random`
  // The same draw with another random stream (a mixup partner's own geometric draws).
  SampleDraw with(SampleRandom& other) const { return {dataset, augment, other, pool, strong}; }
};

class SamplePipeline {
 public:
  virtual ~SamplePipeline() = default;
  // What it is, for the log and `data bench` ("ultralytics v8_transforms").
  virtual std::string_view name() const = 0;
  // A square augment.image_size sample with pixel boxes (max_labels is applied by the caller).
  virtual Sample sample(std::size_t index, SampleDraw& draw) const = 0;
  // What the strong stage's switch turns off, for the log; empty: it has none.
  virtual std::string_view strong_stage() const { return "mosaic and mixup"; }
  // true: partners always come from the whole dataset, never from the batch being built.
  virtual bool partners_from_dataset() const { return false; }
  // How the dataset resizes its images for this pipeline (and validation's letterbox).
  virtual ResizeRule resize_rule() const { return ResizeRule::round_up; }
  // A line for the log naming the options set that this pipeline has no step for; empty: none.
  virtual std::string ignored_options(const AugmentConfig& augment) const {
    (void)augment;
    return {};
  }
};

// Four images' mosaic around a centre drawn as Ultralytics and YOLOX draw it (y, then x, in
// U(s/2, 3s/2)): `index` and three partners, loaded at the dataset's resize. `shuffle`: the four
// tiles in a random order (YOLOv5's load_mosaic: the sample's own image in any tile).
PiecedImage draw_mosaic4(SampleDraw& draw, std::size_t index, bool shuffle = false);

}  // namespace libreyolo::data
