// save_plots: what a person looks at after the final validation, in <run>/val/: Ultralytics'
// PR, F1, P and R curves (per class and the mean), its confusion matrix (conf 0.25, IoU 0.45,
// a background row and column), as SVG; and plot_samples validation images with their labels
// and with the predictions (score ≥ 0.25), as JPEG grids.
#pragma once

#include "data/dataset.h"
#include "eval/validator.h"

#include <filesystem>
#include <string>
#include <vector>

namespace libreyolo::eval {

// Ultralytics' ConfusionMatrix for detection: [nc + 1][nc + 1], rows predicted, columns true;
// index nc is background.
std::vector<std::vector<std::int64_t>> confusion_matrix(const std::vector<CocoBox>& ground_truth,
                                                        const std::vector<CocoBox>& detections, int class_count,
                                                        double confidence = 0.25, double iou = 0.45);

// Writes the files (atomically); returns how many.
int write_validation_plots(const std::filesystem::path& dir, const Validation& validation, const std::vector<std::string>& names,
                           const data::DetectionDataset& dataset, int samples);

}  // namespace libreyolo::eval
