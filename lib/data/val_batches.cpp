#include "data/val_batches.h"

#include "data/augment/geometry.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace libreyolo::data {

RectBatchPlan plan_rect_batches(const std::vector<ImageRecord>& records, int batch_size, int image_size, int stride,
                                double pad) {
  std::vector<std::size_t> order(records.size());
  std::iota(order.begin(), order.end(), 0);
  const auto aspect = [&](std::size_t i) { return static_cast<double>(records[i].height) / records[i].width; };
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return aspect(a) < aspect(b); });

  RectBatchPlan plan;
  for (std::size_t start = 0; start < order.size(); start += static_cast<std::size_t>(batch_size)) {
    const std::size_t end = std::min(order.size(), start + static_cast<std::size_t>(batch_size));
    std::vector<std::size_t> batch(order.begin() + static_cast<long>(start), order.begin() + static_cast<long>(end));
    const double smallest = aspect(batch.front());
    const double largest = aspect(batch.back());
    double height = 1, width = 1;  // relative shape [h, w]
    if (largest < 1) {
      height = largest;
    } else if (smallest > 1) {
      width = 1 / smallest;
    }
    const auto to_pixels = [&](double relative) {
      return static_cast<int>(std::ceil(relative * image_size / stride + pad)) * stride;
    };
    plan.shapes.emplace_back(to_pixels(width), to_pixels(height));
    plan.batches.push_back(std::move(batch));
  }
  return plan;
}

ValSample letterbox_for_validation(const DetectionDataset& dataset, std::size_t index, cv::Size shape) {
  const ImageRecord& record = dataset.record(index);
  const Sample resized = dataset.load_resized(index);
  const LetterboxResult boxed = letterbox(resized, shape, /*scale_up=*/false);
  ValSample out;
  out.sample = boxed.sample;
  out.original = cv::Size(record.width, record.height);
  out.gain = boxed.ratio * static_cast<double>(std::max(resized.image.cols, resized.image.rows)) /
             std::max(record.width, record.height);
  out.gain_y = out.gain;
  out.pad = boxed.pad;
  return out;
}

ValSample top_left_for_validation(const DetectionDataset& dataset, std::size_t index, cv::Size shape) {
  // the pixels training saw: LibreYOLO's truncated sides when the dataset follows its rule
  const ImageRecord& record = dataset.record(index);
  const Sample resized = dataset.load_resized(index);
  const LetterboxResult boxed = fit_top_left(resized, shape);
  ValSample out;
  out.sample = boxed.sample;
  out.original = cv::Size(record.width, record.height);
  out.gain = boxed.ratio * static_cast<double>(dataset.image_size()) / std::max(record.width, record.height);
  out.gain_y = out.gain;  // no padding before the image: pad stays (0, 0)
  return out;
}

ValSample stretch_for_validation(const DetectionDataset& dataset, std::size_t index, cv::Size shape) {
  const ImageRecord& record = dataset.record(index);
  ValSample out;
  // As LibreYOLO's RT-DETR validation: its val dataset resizes the long side to imgsz (sides
  // truncated, bilinear), then its preprocessor stretches that; training and predict stretch the
  // original image.
  Sample image = dataset.load_original(index);
  const double ratio = std::min(static_cast<double>(dataset.image_size()) / image.image.rows,
                                static_cast<double>(dataset.image_size()) / image.image.cols);
  const cv::Size fitted(static_cast<int>(image.image.cols * ratio), static_cast<int>(image.image.rows * ratio));
  if (fitted != image.image.size()) image = stretch_to(image, fitted);
  out.sample = stretch_to(image, shape);
  out.original = cv::Size(record.width, record.height);
  out.gain = static_cast<double>(shape.width) / record.width;
  out.gain_y = static_cast<double>(shape.height) / record.height;
  out.clip = false;  // LibreYOLO's DETR postprocess keeps boxes that reach past the image
  return out;
}

RectBatchPlan plan_validation_batches(const std::vector<ImageRecord>& records, int batch_size, int image_size,
                                      InputFit fit) {
  // No extra half-stride border (Ultralytics' rect pad 0.5): LibreYOLO validates at imgsz, and the
  // grey border cost a model trained by it 0.15 mAP50 here (false positives along the edges).
  if (fit == InputFit::letterbox) return plan_rect_batches(records, batch_size, image_size, 32, /*pad=*/0.0);
  RectBatchPlan plan;
  for (std::size_t start = 0; start < records.size(); start += static_cast<std::size_t>(batch_size)) {
    std::vector<std::size_t> batch(std::min(records.size() - start, static_cast<std::size_t>(batch_size)));
    std::iota(batch.begin(), batch.end(), start);
    plan.batches.push_back(std::move(batch));
    plan.shapes.emplace_back(image_size, image_size);
  }
  return plan;
}

ValSample fit_for_validation(const DetectionDataset& dataset, std::size_t index, cv::Size shape, InputFit fit) {
  switch (fit) {
    case InputFit::stretch: return stretch_for_validation(dataset, index, shape);
    case InputFit::letterbox_top_left: return top_left_for_validation(dataset, index, shape);
    case InputFit::letterbox: break;
  }
  return letterbox_for_validation(dataset, index, shape);
}

PixelBox to_original_pixels(const PixelBox& box, const ValSample& sample) {
  const auto map = [&](float value, double pad, double gain, int limit) {
    const double back = (value - pad) / gain;
    return static_cast<float>(sample.clip ? std::clamp(back, 0.0, static_cast<double>(limit)) : back);
  };
  const int w = sample.original.width, h = sample.original.height;
  return {box.cls, map(box.x1, sample.pad.x, sample.gain, w), map(box.y1, sample.pad.y, sample.gain_y, h),
          map(box.x2, sample.pad.x, sample.gain, w), map(box.y2, sample.pad.y, sample.gain_y, h)};
}

}  // namespace libreyolo::data
