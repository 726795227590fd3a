// Classification data: an ImageFolder split as a dataset (a label per image), the views libreyolo
// 1.6.0's classifiers train and validate on (torchvision's RandomResizedCrop and flips; the
// resize-then-centre-crop of evaluation, both with Pillow's bicubic resampling), the training
// augmentation the loader runs, and the collate into a batch (labels as int64 [B]).
#pragma once

#include "core/config.h"
#include "data/batch_source.h"
#include "data/dataset.h"
#include "data/image_folder.h"
#include "data/pipeline.h"
#include "data/sample_random.h"

#include <ATen/Tensor.h>
#include <opencv2/core/mat.hpp>

#include <cstdint>
#include <string_view>
#include <vector>

namespace libreyolo::data {

// The training views' settings: imgsz, RandomResizedCrop's area range (crop_scale=x: (x, 1.0),
// LibreYOLO's classification scale=x) and the flips.
struct ClassifyAugment {
  int image_size = 224;
  double scale_low = 0.5, scale_high = 1.0;
  double flip_lr = 0.5, flip_ud = 0.0;
  static ClassifyAugment from_config(const config::Config& config);
};

class ClassifyDataset final : public Dataset {
 public:
  ClassifyDataset(ImageFolderSplit split, int image_size);

  std::size_t size() const override { return split_.images.size(); }
  int class_count() const override { return static_cast<int>(split_.classes.size()); }
  int image_size() const override { return image_size_; }
  CacheMode cache_mode() const override { return CacheMode::none; }
  std::vector<int> image_classes(std::size_t index) const override { return {label(index)}; }

  const ImageFolderSplit& split() const { return split_; }
  int label(std::size_t index) const { return split_.images[index].label; }
  const std::filesystem::path& path(std::size_t index) const { return split_.images[index].path; }
  // The image as stored (8-bit BGR; no EXIF rotation, as PIL's open). Throws DataError naming the
  // file for an unreadable one. Thread-safe.
  cv::Mat decode(std::size_t index) const;
  // A training view of the image (train_view's), decoding only as much as the crop needs: its box
  // is drawn from the stored size (the header), then a JPEG is decoded at the smallest DCT scale
  // (1/8 to 1) at which the crop still covers image_size x image_size, and that region resized.
  // Thread-safe.
  cv::Mat train_view(std::size_t index, const ClassifyAugment& augment, SampleRandom& random) const;

 private:
  ImageFolderSplit split_;
  int image_size_;
};

// torchvision's RandomResizedCrop.get_params (ratio 3/4 to 4/3, ten tries, then the centre crop
// clamped to the ratio range): the crop's box in a width x height image.
cv::Rect random_resized_crop_box(int width, int height, double scale_low, double scale_high, SampleRandom& random);
// A training view: that crop resized to image_size x image_size (bicubic), then the flips.
cv::Mat train_view(const cv::Mat& image, const ClassifyAugment& augment, SampleRandom& random);
// The evaluation view: the shorter side resized to floor(image_size / crop_pct) (bicubic; the
// longer side int(resize x long / short), as torchvision's Resize), then the centre image_size
// square (torchvision's CenterCrop offsets: round((H - h) / 2), ties to even). `placement`, when
// given: the resize gain and the crop's offset in the resized image.
struct CropPlacement {
  double gain_x = 1, gain_y = 1;
  int left = 0, top = 0;
};
cv::Mat eval_view(const cv::Mat& image, int image_size, double crop_pct, CropPlacement* placement = nullptr);

struct ClassifySample {
  cv::Mat image;  // 8-bit BGR, image_size x image_size
  int label = 0;
};

// The loader's side: sample(index, epoch) draws from (seed, epoch, index) only.
class ClassifyPipeline final : public TrainingAugmentation {
 public:
  ClassifyPipeline(const ClassifyDataset& dataset, ClassifyAugment augment, std::uint64_t seed)
      : dataset_(dataset), augment_(augment), seed_(seed) {}
  ClassifySample sample(std::size_t index, int epoch) const;
  const ClassifyAugment& config() const { return augment_; }
  // nothing strong to turn off (LibreYOLO's no_aug_epochs would stop RandAugment and erasing)
  void set_strong_enabled(bool) override {}
  std::string_view strong_stage() const override { return {}; }

 private:
  const ClassifyDataset& dataset_;
  ClassifyAugment augment_;
  std::uint64_t seed_;
};

// Samples of one size stacked into a Batch: images RGB uint8 [B, 3, H, W] (into `images` when
// given), targets the labels int64 [B].
Batch collate_classify(const std::vector<ClassifySample>& samples, const std::vector<std::size_t>& indices, bool pin_memory,
                       at::Tensor images = {});

}  // namespace libreyolo::data
