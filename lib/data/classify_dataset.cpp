#include "data/classify_dataset.h"

#include "core/error.h"
#include "data/image_io.h"
#include "data/loader.h"
#include "data/resample.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <opencv2/core.hpp>

#include <algorithm>
#include <array>
#include <cfenv>
#include <cmath>

namespace libreyolo::data {

ClassifyDataset::ClassifyDataset(ImageFolderSplit split, int image_size) : split_(std::move(split)), image_size_(image_size) {}

namespace {

// An unreadable image, named with what to do.
DataError unreadable(const std::filesystem::path& file, const CorruptImage& error) {
  return DataError(fmt::format("{}: {} (remove or replace it; `libreyolo data check` lists every unreadable image)", file.string(),
                               error.what()));
}

// The training view of `box` (source pixels, fractional) in `image`: resized to imgsz (bicubic), then the flips.
cv::Mat crop_view(const cv::Mat& image, const cv::Rect2d& box, const ClassifyAugment& augment, SampleRandom& random) {
  cv::Mat view = pillow_resize(image, {augment.image_size, augment.image_size}, ResampleFilter::bicubic, box);
  if (random.chance(augment.flip_lr)) cv::flip(view, view, 1);
  if (random.chance(augment.flip_ud)) cv::flip(view, view, 0);
  return view;
}

}  // namespace

cv::Mat ClassifyDataset::decode(std::size_t index) const {
  try {
    return decode_image(path(index), 0, /*upright=*/false);
  } catch (const CorruptImage& error) {
    throw unreadable(path(index), error);
  }
}

cv::Mat ClassifyDataset::train_view(std::size_t index, const ClassifyAugment& augment, SampleRandom& random) const {
  const auto& file = path(index);
  cv::Rect box;
  cv::Size full;
  cv::Mat image;
  const double side = augment.image_size;
  try {
    image = decode_stored_covering(read_file_bytes(file), [&](cv::Size size) {
      box = random_resized_crop_box(size.width, size.height, augment.scale_low, augment.scale_high, random);
      return cv::Size(static_cast<int>(std::ceil(size.width * side / box.width)), static_cast<int>(std::ceil(size.height * side / box.height)));
    }, full);
  } catch (const CorruptImage& error) {
    throw unreadable(file, error);
  }
  const double sx = static_cast<double>(image.cols) / full.width, sy = static_cast<double>(image.rows) / full.height;
  return crop_view(image, cv::Rect2d(box.x * sx, box.y * sy, box.width * sx, box.height * sy), augment, random);
}

ClassifyAugment ClassifyAugment::from_config(const config::Config& config) {
  ClassifyAugment augment;
  augment.image_size = config.get_image_size("imgsz").height;
  augment.scale_low = config.get_real("crop_scale");
  augment.flip_lr = config.get_real("flip_prob");
  augment.flip_ud = config.get_real("flipud");
  if (!(augment.scale_low > 0 && augment.scale_low <= 1)) {
    throw UsageError(fmt::format("crop_scale={}: RandomResizedCrop's smallest share of the image area; give a number in (0, 1]",
                                 augment.scale_low));
  }
  return augment;
}

namespace {

// Python's round(): halves to even (the default floating-point rounding mode).
int round_half_even(double value) { return static_cast<int>(std::nearbyint(value)); }

}  // namespace

cv::Rect random_resized_crop_box(int width, int height, double scale_low, double scale_high, SampleRandom& random) {
  const double area = static_cast<double>(width) * height;
  const std::array<double, 2> ratio{3.0 / 4.0, 4.0 / 3.0};
  const double log_low = std::log(ratio[0]), log_high = std::log(ratio[1]);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area = area * random.uniform(scale_low, scale_high);
    const double aspect = std::exp(random.uniform(log_low, log_high));
    const int w = round_half_even(std::sqrt(target_area * aspect));
    const int h = round_half_even(std::sqrt(target_area / aspect));
    if (w > 0 && w <= width && h > 0 && h <= height) {
      const int top = random.integer(0, height - h);
      const int left = random.integer(0, width - w);
      return {left, top, w, h};
    }
  }
  const double in_ratio = static_cast<double>(width) / height;
  int w = width, h = height;
  if (in_ratio < ratio[0]) {
    h = round_half_even(w / ratio[0]);
  } else if (in_ratio > ratio[1]) {
    w = round_half_even(h * ratio[1]);
  }
  return {(width - w) / 2, (height - h) / 2, w, h};
}

cv::Mat train_view(const cv::Mat& image, const ClassifyAugment& augment, SampleRandom& random) {
  const cv::Rect box = random_resized_crop_box(image.cols, image.rows, augment.scale_low, augment.scale_high, random);
  return crop_view(image, cv::Rect2d(box.x, box.y, box.width, box.height), augment, random);
}

cv::Mat eval_view(const cv::Mat& image, int image_size, double crop_pct, CropPlacement* placement) {
  if (!(crop_pct > 0 && crop_pct <= 1)) throw UsageError(fmt::format("crop_pct={}: give a share in (0, 1]", crop_pct));
  const int resize = static_cast<int>(std::floor(image_size / crop_pct));
  const bool portrait = image.cols <= image.rows;
  const int short_side = portrait ? image.cols : image.rows, long_side = portrait ? image.rows : image.cols;
  const int new_long = static_cast<int>(static_cast<double>(resize) * long_side / short_side);
  const cv::Size size = portrait ? cv::Size(resize, new_long) : cv::Size(new_long, resize);
  const cv::Mat resized = size == image.size() ? image : pillow_resize(image, size, ResampleFilter::bicubic);
  // torchvision pads a crop larger than the image with zeros first; at crop_pct <= 1 it never is
  const int top = round_half_even((resized.rows - image_size) / 2.0);
  const int left = round_half_even((resized.cols - image_size) / 2.0);
  if (placement) {
    *placement = {.gain_x = static_cast<double>(size.width) / image.cols, .gain_y = static_cast<double>(size.height) / image.rows,
                  .left = left, .top = top};
  }
  return resized(cv::Rect(left, top, image_size, image_size)).clone();
}

ClassifySample ClassifyPipeline::sample(std::size_t index, int epoch) const {
  SampleRandom random(seed_, static_cast<std::uint64_t>(epoch), index);
  return {dataset_.train_view(index, augment_, random), dataset_.label(index)};
}

Batch collate_classify(const std::vector<ClassifySample>& samples, const std::vector<std::size_t>& indices, bool pin_memory,
                       at::Tensor images) {
  Batch batch;
  batch.indices = indices;
  const int count = static_cast<int>(samples.size());
  batch.images = stack_images(count, [&](int b) -> const cv::Mat& { return samples[b].image; }, pin_memory, std::move(images));
  batch.targets = at::empty({count}, at::kLong);
  auto* label = batch.targets.data_ptr<std::int64_t>();
  for (const auto& sample : samples) *label++ = sample.label;
  return batch;
}

}  // namespace libreyolo::data
