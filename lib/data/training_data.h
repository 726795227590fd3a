// From a resolved config to what training consumes: the dataset spec, the scanned train split
// as a DetectionDataset (with its cache mode) and the loader's pipeline running the family's.
#pragma once

#include "core/config.h"
#include "data/dataset.h"
#include "data/dataset_yaml.h"
#include "data/label_scan.h"
#include "data/pipeline.h"

#include <memory>
#include <string>

namespace libreyolo::data {

// One split's records: a COCO JSON read (spec.annotation_file), else the images listed and their
// YOLO labels scanned; with single_cls every box is class 0. Logs nothing.
ScanResult read_split(const DatasetSpec& spec, const std::string& split, int workers);

// Lists and scans one split, logging Ultralytics' line ("train: Scanning ... N images, M
// backgrounds, K corrupt") and one warning per skipped image.
ScanResult scan_split(const DatasetSpec& spec, const std::string& split, int workers);

struct TrainingData {
  DatasetSpec spec;
  std::unique_ptr<DetectionDataset> dataset;
  std::unique_ptr<TrainPipeline> pipeline;
};

// The train split scanned into a dataset that resizes by `steps`' rule, and the loader's pipeline
// running `steps` (the family's, models::Family::sample_pipeline). Throws DataError when the train
// split has no valid image.
TrainingData load_training_data(const config::Config& config, std::shared_ptr<const SamplePipeline> steps);

}  // namespace libreyolo::data
