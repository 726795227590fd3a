#include "models/yolo_common/yolox_pipeline.h"

#include "data/augment/color.h"
#include "data/augment/geometry.h"
#include "data/augment/mosaic_mixup.h"

namespace libreyolo::models::yolo_common {

namespace {

using data::Sample;
using data::SampleDraw;
using data::SampleRandom;

class YoloxPipeline final : public data::SamplePipeline {
 public:
  std::string_view name() const override { return "yolox mosaic-mixup"; }
  data::ResizeRule resize_rule() const override { return data::ResizeRule::truncate; }

  Sample sample(std::size_t index, SampleDraw& draw) const override {
    SampleRandom& random = draw.random;
    const data::AugmentConfig& augment = draw.augment;
    const int s = augment.image_size;
    const cv::Size input(s, s);
    Sample out;
    if (draw.strong && random.chance(augment.mosaic)) {
      const data::PerspectiveParams params{augment.degrees, augment.translate, augment.scale_low, augment.scale_high,
                                           augment.shear, 0.0};
      const data::PiecedImage pieces = data::draw_mosaic4(draw, index);
      out = data::random_affine(Sample{pieces.paint(), pieces.boxes}, params, input, random);
      if (!out.boxes.empty() && random.chance(augment.mixup)) {
        // YOLOX draws partners until one has labels; bounded here for label-less datasets.
        for (int attempt = 0; attempt < 32; ++attempt) {
          const std::size_t partner = draw.partner();
          if (draw.dataset.record(partner).boxes.empty()) continue;
          out = data::mixup_jittered_paste(out, draw.dataset.load_resized(partner),
                                           {augment.mixup_scale_low, augment.mixup_scale_high}, random);
          break;
        }
      }
    } else {
      out = draw.dataset.load_resized(index);
      out.image = out.image.clone();  // may be a cached image: HSV below works in place
    }

    // TrainTransform
    if (out.boxes.empty()) return data::fit_top_left(out, input).sample;
    const Sample original = {out.image.clone(), out.boxes};
    if (random.chance(augment.hsv_prob)) data::hsv_additive(out.image, 5, 30, 30, random);
    if (random.chance(augment.flip_lr)) data::flip_horizontal_in_place(out);
    Sample fitted = data::fit_top_left(out, input).sample;
    data::drop_small_boxes(fitted.boxes, input, 1.0f);
    if (fitted.boxes.empty()) {  // every box vanished: fall back to the un-augmented sample
      fitted = data::fit_top_left(original, input).sample;
      data::drop_small_boxes(fitted.boxes, input, 1.0f);
    }
    return fitted;
  }
};

}  // namespace

std::shared_ptr<const data::SamplePipeline> yolox_pipeline() { return std::make_shared<YoloxPipeline>(); }

}  // namespace libreyolo::models::yolo_common
