// From a resolved config to what training consumes: the dataset spec, the scanned train split
// as a DetectionDataset (with its cache mode) and the family's augmentation pipeline.
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

// The dataset rule of a family's pipeline: LibreYOLO's YOLOX-style dataset (truncate) under the
// yolox recipe, Ultralytics' (round_up) otherwise (the DETR recipes start from the original image).
ResizeRule resize_rule_for(Recipe recipe);

struct TrainingData {
  DatasetSpec spec;
  std::unique_ptr<DetectionDataset> dataset;
  std::unique_ptr<TrainPipeline> pipeline;
};

// Throws DataError when the train split has no valid image.
TrainingData load_training_data(const config::Config& config, Recipe recipe);

}  // namespace libreyolo::data
