// The loader's side of training augmentation: runs a family's SamplePipeline
// (data/sample_pipeline.h) for each sample with its random draws (derived from seed, epoch and
// index), the partner pool, the strong stage's switch and max_labels.
#pragma once

#include "core/config.h"
#include "data/dataset.h"
#include "data/sample_pipeline.h"
#include "data/sample.h"
#include "data/sample_random.h"

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace libreyolo::data {

// What the trainer asks of a task's training augmentation, whatever its samples: the strong
// stage's switch and what it turns off.
class TrainingAugmentation {
 public:
  virtual ~TrainingAugmentation() = default;
  virtual void set_strong_enabled(bool enabled) = 0;
  // What the switch turns off, for the log ("mosaic and mixup"); empty: nothing.
  virtual std::string_view strong_stage() const = 0;
};

// Detection's.
class TrainPipeline final : public TrainingAugmentation {
 public:
  TrainPipeline(const DetectionDataset& dataset, AugmentConfig augment, std::shared_ptr<const SamplePipeline> steps,
                std::uint64_t seed);

  // The strong stage's switch (LibreYOLO's no_aug_epochs, and D-FINE's and DEIM's
  // aug_stop_epoch_ratio): mosaic and mixup, or D-FINE's photometric, zoom-out and crop, off.
  void set_strong_enabled(bool enabled) override { mosaic_enabled_ = enabled; }
  bool mosaic_enabled() const { return mosaic_enabled_; }
  const AugmentConfig& config() const { return augment_; }
  const SamplePipeline& steps() const { return *steps_; }
  std::shared_ptr<const SamplePipeline> shared_steps() const { return steps_; }
  // What the switch turns off, for the log: "mosaic and mixup", ...; empty: nothing (RT-DETR's).
  std::string_view strong_stage() const override { return steps_->strong_stage(); }

  // A square image_size x image_size sample with pixel boxes. Mosaic and mixup partners are
  // drawn from `pool` (the batch being built, like Ultralytics' buffer of recent images, so
  // their decodes are shared) when it holds at least 4 images, else (and always where the
  // pipeline says partners_from_dataset) from the whole dataset.
  Sample sample(std::size_t index, int epoch, std::span<const std::size_t> pool = {}) const;

 private:
  const DetectionDataset& dataset_;
  AugmentConfig augment_;
  std::shared_ptr<const SamplePipeline> steps_;
  std::uint64_t seed_;
  bool mosaic_enabled_ = true;
};

}  // namespace libreyolo::data
