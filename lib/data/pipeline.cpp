#include "data/pipeline.h"

namespace libreyolo::data {

TrainPipeline::TrainPipeline(const DetectionDataset& dataset, AugmentConfig augment, std::shared_ptr<const SamplePipeline> steps,
                             std::uint64_t seed)
    : dataset_(dataset), augment_(std::move(augment)), steps_(std::move(steps)), seed_(seed) {}

Sample TrainPipeline::sample(std::size_t index, int epoch, std::span<const std::size_t> pool) const {
  SampleRandom random(seed_, static_cast<std::uint64_t>(epoch), index);
  // a pool too small to mix well, or a pipeline whose partners come from the dataset: the whole
  // dataset (same draws, no index list)
  if (pool.size() < 4 || steps_->partners_from_dataset()) pool = {};
  SampleDraw draw{dataset_, augment_, random, pool, mosaic_enabled_};
  Sample out = steps_->sample(index, draw);
  if (static_cast<int>(out.boxes.size()) > augment_.max_labels) out.boxes.resize(augment_.max_labels);
  return out;
}

}  // namespace libreyolo::data
