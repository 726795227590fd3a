#include "models/yolo_common/ultralytics_pipeline.h"

#include "data/augment/color.h"
#include "data/augment/geometry.h"
#include "data/augment/mosaic_mixup.h"

namespace libreyolo::models::yolo_common {

namespace {

using data::Sample;
using data::SampleDraw;
using data::SampleRandom;

class UltralyticsPipeline final : public data::SamplePipeline {
 public:
  explicit UltralyticsPipeline(bool yolov5_mosaic) : yolov5_mosaic_(yolov5_mosaic) {}
  std::string_view name() const override { return yolov5_mosaic_ ? "yolov5 load_mosaic" : "ultralytics v8_transforms"; }
  bool partners_from_dataset() const override { return yolov5_mosaic_; }

  Sample sample(std::size_t index, SampleDraw& draw) const override {
    SampleRandom& random = draw.random;
    const data::AugmentConfig& augment = draw.augment;
    const bool use_mosaic = draw.strong && random.chance(augment.mosaic);
    Sample out = geometric(index, draw, use_mosaic);
    if (draw.strong && random.chance(augment.mixup)) {
      const std::size_t partner = draw.partner();
      SampleRandom partner_random = random.split();
      SampleDraw partner_draw = draw.with(partner_random);
      out = data::mixup_beta(out, geometric(partner, partner_draw, use_mosaic), random);
    }
    // the geometric step always produced a fresh image, so colour work can be in place
    if (random.chance(augment.hsv_prob)) {
      data::hsv_multiplicative(out.image, augment.hue, augment.saturation, augment.value, random);
    }
    if (random.chance(augment.flip_ud)) data::flip_vertical_in_place(out);
    if (random.chance(augment.flip_lr)) data::flip_horizontal_in_place(out);
    return out;
  }

 private:
  Sample geometric(std::size_t index, SampleDraw& draw, bool use_mosaic) const {
    const data::AugmentConfig& a = draw.augment;
    const int s = a.image_size;
    const data::PerspectiveParams params{a.degrees, a.translate, a.scale_low, a.scale_high, a.shear, a.perspective};
    if (use_mosaic) return data::random_perspective(data::draw_mosaic4(draw, index, yolov5_mosaic_), params, cv::Size(s, s), draw.random);
    const auto boxed = data::letterbox(draw.dataset.load_resized(index), cv::Size(s, s));
    return data::random_perspective(boxed.sample, params, cv::Size(s, s), draw.random);
  }

  bool yolov5_mosaic_;
};

}  // namespace

std::shared_ptr<const data::SamplePipeline> ultralytics_pipeline(bool yolov5_mosaic) {
  return std::make_shared<UltralyticsPipeline>(yolov5_mosaic);
}

}  // namespace libreyolo::models::yolo_common
