#include "data/training_data.h"

#include "core/error.h"
#include "core/log.h"
#include "data/coco_json.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace libreyolo::data {

ScanResult read_split(const DatasetSpec& spec, const std::string& split, int workers) {
  ScanResult scan;
  if (const auto* json = spec.annotation_file(split)) {
    scan = read_coco_split(*json, spec.split(split).front(), spec.category_ids);
  } else {
    const auto images = list_images(spec.split(split), split);
    scan = scan_images(images, spec.label_classes ? spec.label_classes : spec.class_count(), {.threads = std::max(1, workers)});
  }
  if (spec.label_classes) {  // single_cls
    for (auto& record : scan.images) {
      for (auto& box : record.boxes) box.cls = 0;
      for (auto& annotation : record.annotations) annotation.cls = 0;
    }
  }
  return scan;
}

ScanResult scan_split(const DatasetSpec& spec, const std::string& split, int workers) {
  ScanResult scan = read_split(spec, split, workers);
  const std::size_t listed = scan.coco ? static_cast<std::size_t>(scan.coco->images) : scan.images.size() + scan.corrupt;
  std::vector<std::string> sources;
  for (const auto& source : spec.split(split)) sources.push_back(source.string());
  if (listed == 0) {
    throw DataError(fmt::format("{}: the '{}' split ({}) holds no images (.jpg, .png, .bmp, .tif, .webp ...): check its "
                                "path in the YAML", spec.yaml_file.string(), split, fmt::join(sources, ", ")));
  }
  for (const auto& message : scan.messages) log::warn("{}", message);
  // as Ultralytics: the cache file when it was used, else the labels folder that was scanned
  std::string scanned = scan.cache_file.string();
  if (!scan.from_cache && scanned.ends_with(".libreyolo.cache")) scanned.resize(scanned.size() - 16);
  if (scanned.empty()) scanned = fmt::format("{}", fmt::join(sources, ", "));
  log::info("{}: Scanning {}... {}", split, scanned, scan.summary());
  if (scan.images.empty()) {
    throw DataError(fmt::format("{}: no valid image in the '{}' split (of {} found){}", spec.yaml_file.string(), split, listed,
                                scan.messages.empty() ? ": each is corrupt or unreadable; run `libreyolo data check` on it"
                                                      : "; see the messages above"));
  }
  return scan;
}

TrainingData load_training_data(const config::Config& config, std::shared_ptr<const SamplePipeline> steps) {
  TrainingData data;
  data.spec = load_dataset_spec(config.get_text("data"));
  if (data.spec.train.empty()) {
    throw DataError(fmt::format("{}: the key 'train' is missing; training needs it: a folder of images, a .txt list of "
                                "image paths, or a list of those (relative to 'path')",
                                data.spec.yaml_file.string()));
  }
  if (config.get_bool("single_cls")) data.spec.merge_classes();
  const int workers = static_cast<int>(config.get_int("workers"));
  ScanResult scan = scan_split(data.spec, "train", workers);
  const AugmentConfig augment = AugmentConfig::from_config(config);
  if (const std::string ignored = steps->ignored_options(augment); !ignored.empty()) log::info("{}", ignored);
  auto dataset = std::make_unique<DetectionDataset>(std::move(scan.images), data.spec.class_count(), augment.image_size,
                                                    parse_cache_mode(config.get_text("cache")), steps->resize_rule());
  data.pipeline = std::make_unique<TrainPipeline>(*dataset, augment, std::move(steps), static_cast<std::uint64_t>(config.get_int("seed")));
  data.dataset = std::move(dataset);
  return data;
}

}  // namespace libreyolo::data
