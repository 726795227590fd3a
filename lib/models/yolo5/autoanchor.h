// YOLOv5's AutoAnchor: before training, measure how well the anchors fit the training labels
// (the best possible recall: the share of boxes whose best anchor is within anchor_t in both
// sides) and, when it is 0.98 or less, evolve new ones (k-means on the whitened sizes, then 1000
// generations of mutation kept when the fitness improves) and keep them if they fit better.
#pragma once

#include "data/dataset.h"

#include <ATen/Tensor.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <string>

namespace libreyolo::models::yolo5 {

struct AnchorFit {
  double best_possible_recall = 0;  // share of boxes with an anchor past 1 / threshold
  double anchors_per_target = 0;    // anchors past 1 / threshold, per box
};

// `sizes` [N, 2] box (w, h) and `anchors` [K, 2] in pixels.
AnchorFit anchor_fit(const at::Tensor& sizes, const at::Tensor& anchors, double threshold);

// Every training box's (w, h) in pixels with the image's long side at `image_size`; with a seed,
// each image's scaled by U(0.9, 1.1) as yolov5 augments them for the check (seed < 0: none).
at::Tensor label_sizes(const data::DetectionDataset& dataset, int image_size, std::int64_t seed);

// k-means (30 restarts, on sizes whitened by their spread) then `generations` of mutation (p 0.9,
// sigma 0.1, factors clipped to [0.3, 3], sides at least 2 px) kept when the fitness (mean best
// ratio past 1 / threshold) improves. Boxes under 2 px on both sides are left out. Returns
// [count, 2] pixels, smallest area first.
at::Tensor evolve_anchors(const at::Tensor& sizes, int count, int image_size, double threshold, int generations,
                          std::uint64_t seed);

// The check on a model's anchors buffer ([levels, anchors, 2], grid units), replaced in place
// when evolved ones fit better. Returns the line for the log.
std::string check_anchors(at::Tensor& grid_anchors, const data::DetectionDataset& dataset, int image_size, double threshold,
                          std::uint64_t seed);

// What train.py does after the check (`model.half().float()`): every floating parameter and buffer
// rounded to float16's precision, kept in its own type.
void round_to_half(torch::nn::Module& model);

}  // namespace libreyolo::models::yolo5
