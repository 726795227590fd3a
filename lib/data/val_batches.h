// Validation batches as Ultralytics builds them: images sorted by aspect ratio, one
// rectangular shape per batch (a stride multiple, plus half a stride of padding), each image
// letterboxed into it without upscaling; the ratio and padding are kept so predictions map
// back to original pixels.
#pragma once

#include "data/dataset.h"
#include "data/input_fit.h"
#include "data/sample.h"

#include <vector>

namespace libreyolo::data {

struct RectBatchPlan {
  std::vector<std::vector<std::size_t>> batches;  // dataset indices, sorted by aspect ratio
  std::vector<cv::Size> shapes;                   // width x height of each batch
};

RectBatchPlan plan_rect_batches(const std::vector<ImageRecord>& records, int batch_size, int image_size,
                                int stride = 32, double pad = 0.5);

struct ValSample {
  Sample sample;            // letterboxed (or stretched) image, boxes in its pixels
  cv::Size original;        // original (upright) image size
  double gain = 1;          // letterboxed pixels per original pixel (horizontally, when stretched)
  double gain_y = 1;        // vertically: `gain` unless stretched
  cv::Point2d pad;          // left/top padding in letterboxed pixels
  bool clip = true;         // boxes back to original pixels are clipped to the image (not the DETRs', as LibreYOLO)
};

ValSample letterbox_for_validation(const DetectionDataset& dataset, std::size_t index, cv::Size shape);

// The image (its long side resized to imgsz) in the top-left corner of `shape`, the rest grey, as
// LibreYOLO's YOLOX, YOLOv7 and RTMDet validate.
ValSample top_left_for_validation(const DetectionDataset& dataset, std::size_t index, cv::Size shape);

// The image, its long side resized to imgsz, stretched to `shape` (bilinear, aspect not kept, no
// border), as LibreYOLO's DETRs validate.
ValSample stretch_for_validation(const DetectionDataset& dataset, std::size_t index, cv::Size shape);

// The plan of validation batches for a fit: rectangular letterbox batches, or every batch
// image_size x image_size (top-left letterbox, stretch) in dataset order.
RectBatchPlan plan_validation_batches(const std::vector<ImageRecord>& records, int batch_size, int image_size,
                                      InputFit fit);
ValSample fit_for_validation(const DetectionDataset& dataset, std::size_t index, cv::Size shape, InputFit fit);

// Letterboxed- or stretched-image box -> original-image pixels (clipped to the image, where `clip`).
PixelBox to_original_pixels(const PixelBox& box, const ValSample& sample);

}  // namespace libreyolo::data
