#include "train/setup_stages.h"

#include "core/log.h"
#include "data/sampling.h"
#include "models/family.h"

#include <algorithm>

namespace libreyolo::train {

namespace {

// min_samples (an epoch floor for tiny datasets) and class_balanced (repeat-factor weights): both
// draw with replacement, as LibreYOLO's samplers do.
void set_up_sampling(const config::Config& config, const eval::TaskTypes::Dataset& dataset, int class_count,
                     data::LoaderOptions& options) {
  const auto size = dataset.size();
  const auto min_samples = static_cast<std::size_t>(config.get_int("min_samples"));
  if (min_samples > size) options.samples_per_epoch = min_samples;
  if (config.get_bool("class_balanced")) {
    if (config.get_bool("single_cls")) log::warn("class_balanced=true has no effect with single_cls=true: every label is one class");
    options.weights = data::repeat_factors(dataset, class_count);
    log::info("class_balanced sampling active: {} images, drawing {} samples per epoch", size, std::max(size, options.samples_per_epoch));
  } else if (options.samples_per_epoch) {
    log::info("min_samples={} epoch floor active: dataset has {} images; drawing {} samples per epoch", min_samples, size,
              options.samples_per_epoch);
  }
}

}  // namespace

void set_up_data(const config::Config& config, const eval::Task& task, const Placement& place, Inputs& inputs) {
  inputs.data = task.load_training_data(config, models::family_of(config).sample_pipeline());
  inputs.class_count = inputs.data.spec.class_count();
  inputs.image_size = inputs.data.dataset->image_size();
  if (config.get_bool("val") && !inputs.data.spec.val.empty()) {
    inputs.val_dataset = task.load_split(inputs.data.spec, "val", place.workers, inputs.image_size,
                                         data::parse_cache_mode(config.get_text("cache")), inputs.data.dataset->resize_rule());
  }
  // Each rank takes every world-th sample of the epoch's order: its batch i and the other ranks'
  // batch i together are exactly the single-process global batch i, whatever the world size.
  data::LoaderOptions options{.batch_size = place.batch_size, .workers = place.workers, .shuffle = true, .seed = place.seed,
                              .rank = place.rank(), .world_size = place.world_size(), .pin_memory = place.device.is_cuda()};
  set_up_sampling(config, *inputs.data.dataset, inputs.class_count, options);
  options.drop_last = task.drops_incomplete_batch() &&
                      std::max(inputs.data.dataset->size(), options.samples_per_epoch) / static_cast<std::size_t>(place.world_size()) >=
                          static_cast<std::size_t>(place.batch_size);
  inputs.loader = task.make_loader(inputs.data, std::move(options));
}

}  // namespace libreyolo::train
