// `libreyolo data bench data=...`: images/s of the full training data pipeline (decode,
// augment, collate) through the threaded loader, median of `repeat` runs, as one JSON line;
// plus the single-thread cost of decoding and of the augmentation step alone, to compare the
// loader with the sum of its parts (classification: the full decode, the training view decoded as
// far as its crop needs, and the evaluation view).
#include "commands.h"
#include "core/config.h"
#include "models/family.h"
#include "models/checkpoint.h"
#include "core/error.h"
#include "core/log.h"
#include "eval/task.h"
#include "data/classify_dataset.h"
#include "data/loader.h"
#include "data/training_data.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>

namespace libreyolo::cli {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

// Milliseconds per call of `work(i)` over the first `count` indices, on this thread.
template <typename Work>
double milliseconds_per_call(std::size_t count, Work&& work) {
  const auto start = Clock::now();
  for (std::size_t i = 0; i < count; ++i) work(i);
  return 1000.0 * seconds_since(start) / static_cast<double>(count);
}

// images/s of `loader` over `timed_batches` batches, once per run (a new epoch each).
std::vector<double> loader_rates(data::BatchSource& loader, std::int64_t repeat, int timed_batches, int& epoch) {
  std::vector<double> rates;
  for (std::int64_t run = 0; run < repeat; ++run) {
    loader.start_epoch(epoch++);
    std::size_t images = 0;
    const auto start = Clock::now();
    for (int b = 0; b < timed_batches; ++b) {
      auto next = loader.next();
      if (!next) {
        loader.start_epoch(epoch++);
        next = loader.next();
      }
      images += static_cast<std::size_t>(next->images.size(0));
    }
    rates.push_back(static_cast<double>(images) / seconds_since(start));
    log::info("run {}: {:.1f} images/s", run + 1, rates.back());
  }
  return rates;
}

// Classification's: the task's loader (decode as much as the crop needs, RandomResizedCrop, flips,
// collate), and on one thread the full decode, the training view (decoded as far as its crop needs,
// and from a full decode) and the evaluation view.
int bench_classification(const config::Config& config, const eval::Task& task, const data::TrainingData& training) {
  const auto& dataset = dynamic_cast<const data::ClassifyDataset&>(*training.dataset);
  const auto augment = data::ClassifyAugment::from_config(config);
  const int batch = static_cast<int>(std::max<std::int64_t>(1, config.get_int("batch")));
  const int workers = static_cast<int>(config.get_int("workers"));
  const std::size_t probe = std::min<std::size_t>(32, dataset.size());
  const double decode_ms = milliseconds_per_call(probe, [&](std::size_t i) { (void)dataset.decode(i); });
  const double train_view_ms = milliseconds_per_call(probe, [&](std::size_t i) {
    data::SampleRandom random(0, 0, i);
    (void)dataset.train_view(i, augment, random);
  });
  const double train_view_full_decode_ms = milliseconds_per_call(probe, [&](std::size_t i) {
    data::SampleRandom random(0, 0, i);
    (void)data::train_view(dataset.decode(i), augment, random);
  });
  const double eval_view_ms = milliseconds_per_call(probe, [&](std::size_t i) {
    (void)data::eval_view(dataset.decode(i), augment.image_size, config.get_real("crop_pct"));
  });
  const auto loader = task.make_loader(training, {.batch_size = batch, .workers = workers, .seed = static_cast<std::uint64_t>(config.get_int("seed")),
                                                  .pin_memory = data::pinned_memory_available()});
  int epoch = 0;
  const auto rates = loader_rates(*loader, config.get_int("repeat"), static_cast<int>(config.get_int("bench_batches")), epoch);
  const nlohmann::json result = {
      {"bench", "data_pipeline"},
      {"task", std::string(task.name())},
      {"data", config.get_text("data")},
      {"family", std::string(models::family_of(config).name())},
      {"imgsz", augment.image_size},
      {"batch", batch},
      {"workers", workers},
      {"images_per_second_median", median(rates)},
      {"images_per_second_runs", rates},
      {"single_thread_full_decode_ms_per_image", decode_ms},
      {"single_thread_train_view_ms_per_image", train_view_ms},
      {"single_thread_train_view_full_decode_ms_per_image", train_view_full_decode_ms},
      {"single_thread_eval_view_ms_per_image", eval_view_ms},
      {"hardware_threads", std::thread::hardware_concurrency()},
      {"pinned_memory", data::pinned_memory_available()},
  };
  fmt::print("{}\n", result.dump());
  return 0;
}

}  // namespace

int run_data_bench(const Arguments& arguments) {
  const auto config = models::parse_arguments(config::command_data, arguments);
  log::set_quiet(config.get_bool("quiet"));
  if (config.get_text("data").empty()) throw UsageError("data= is required: libreyolo data bench data=coco128");
  const eval::Task& task = eval::task_of(config);
  const auto training = task.load_training_data(config, models::family_of(config).sample_pipeline());
  if (!training.detection_pipeline()) return bench_classification(config, task, training);
  const auto& dataset = *training.detection_dataset();
  const auto& pipeline = *training.detection_pipeline();
  const int batch = static_cast<int>(std::max<std::int64_t>(1, config.get_int("batch")));
  const int workers = static_cast<int>(config.get_int("workers"));
  const int timed_batches = static_cast<int>(config.get_int("bench_batches"));

  // single-thread parts: decode+resize without any cache, then augmentation on RAM-cached images
  const std::size_t probe = std::min<std::size_t>(32, dataset.size());
  std::vector<data::ImageRecord> records;
  for (std::size_t i = 0; i < dataset.size(); ++i) records.push_back(dataset.record(i));
  const data::DetectionDataset uncached(records, dataset.class_count(), dataset.image_size(), data::CacheMode::none,
                                        dataset.resize_rule());
  const data::DetectionDataset cached(records, dataset.class_count(), dataset.image_size(), data::CacheMode::ram,
                                      dataset.resize_rule());
  for (std::size_t i = 0; i < cached.size(); ++i) cached.load_resized(i);
  const data::TrainPipeline cached_pipeline(cached, pipeline.config(), pipeline.shared_steps(),
                                           static_cast<std::uint64_t>(config.get_int("seed")));
  const double decode_ms = milliseconds_per_call(probe, [&](std::size_t i) { uncached.load_resized(i); });
  const double augment_ms = milliseconds_per_call(probe, [&](std::size_t i) { cached_pipeline.sample(i, 0); });

  data::Loader loader([&](std::size_t index, int epoch, std::span<const std::size_t> batch) {
        return pipeline.sample(index, epoch, batch);
      },
      dataset.size(),
                      {.batch_size = batch,
                       .workers = workers,
                       .seed = static_cast<std::uint64_t>(config.get_int("seed")),
                       .pin_memory = data::pinned_memory_available()});
  int epoch = 0;
  if (dataset.cache_mode() != data::CacheMode::none) {  // fill the cache once, untimed
    loader.start_epoch(epoch++);
    while (loader.next()) {
    }
  }
  const std::vector<double> rates = loader_rates(loader, config.get_int("repeat"), timed_batches, epoch);

  const auto& augment = pipeline.config();
  const nlohmann::json result = {
      {"bench", "data_pipeline"},
      {"data", config.get_text("data")},
      {"family", std::string(models::family_of(config).name())},
      {"pipeline", std::string(pipeline.steps().name())},
      {"imgsz", augment.image_size},
      {"batch", batch},
      {"workers", workers},
      {"cache", config.get_text("cache")},
      {"mosaic", augment.mosaic},
      {"mixup", augment.mixup},
      {"images_per_second_median", median(rates)},
      {"images_per_second_runs", rates},
      {"single_thread_decode_ms_per_image", decode_ms},
      {"single_thread_augment_ms_per_sample", augment_ms},
      {"hardware_threads", std::thread::hardware_concurrency()},
      {"pinned_memory", data::pinned_memory_available()},
  };
  fmt::print("{}\n", result.dump());
  return 0;
}

}  // namespace libreyolo::cli
