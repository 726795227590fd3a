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

// A task's training split and its augmentation (eval::Task::load_training_data); detection's
// are a DetectionDataset and a TrainPipeline.
struct TrainingData {
  DatasetSpec spec;
  std::unique_ptr<Dataset> dataset;
  std::unique_ptr<TrainingAugmentation> pipeline;

  // Detection's parts, for what only detection has (`data preview`, YOLOv5's AutoAnchor): nullptr
  // for another task's data.
  const DetectionDataset* detection_dataset() const { return dynamic_cast<const DetectionDataset*>(dataset.get()); }
  const TrainPipeline* detection_pipeline() const { return dynamic_cast<const TrainPipeline*>(pipeline.get()); }
};

// The train split scanned into a dataset that resizes by `steps`' rule, and the loader's pipeline
// running `steps` (the family's, models::Family::sample_pipeline). Throws DataError when the train
// split has no valid image.
TrainingData load_training_data(const config::Config& config, std::shared_ptr<const SamplePipeline> steps);

}  // namespace libreyolo::data
