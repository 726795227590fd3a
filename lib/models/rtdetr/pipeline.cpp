#include "models/rtdetr/pipeline.h"

#include "data/augment/color.h"
#include "data/augment/geometry.h"

namespace libreyolo::models::rtdetr {

namespace {

using data::Sample;

class RtdetrPipeline final : public data::SamplePipeline {
 public:
  std::string_view name() const override { return "rt-detr transform"; }
  std::string_view strong_stage() const override { return {}; }  // no strong stage
  std::string ignored_options(const data::AugmentConfig& a) const override {
    if (a.mosaic > 0 || a.mixup > 0 || a.degrees > 0 || a.shear > 0 || a.perspective > 0) {
      return "mosaic, mixup, degrees, shear and perspective are ignored: the DETR pipeline (LibreYOLO's RT-DETR "
             "transform) has HSV jitter, flips and the stretch only";
    }
    return {};
  }

  // Additive HSV and flips on the image at its own size (decoded for each sample: cache= does not
  // apply), then stretched to the square; boxes not over 1 px on a side dropped, and where none is
  // left, the un-augmented image instead.
  Sample sample(std::size_t index, data::SampleDraw& draw) const override {
    data::SampleRandom& random = draw.random;
    const data::AugmentConfig& augment = draw.augment;
    const cv::Size input(augment.image_size, augment.image_size);
    Sample out = draw.dataset.load_original(index);  // one resize, the stretch (LibreYOLO's wants_unresized_image)
    const bool had_boxes = !out.boxes.empty();
    if (random.chance(augment.hsv_prob)) data::hsv_additive(out.image, 5, 30, 30, random);  // in place: a fresh decode
    if (random.chance(augment.flip_lr)) data::flip_horizontal_in_place(out);
    if (random.chance(augment.flip_ud)) data::flip_vertical_in_place(out);
    Sample fitted = data::stretch_to(out, input);
    if (!had_boxes) return fitted;
    data::drop_small_boxes(fitted.boxes, input, 1.0f);
    // rare: decoded again rather than an untouched copy kept for every sample
    if (fitted.boxes.empty()) fitted = data::stretch_to(draw.dataset.load_original(index), input);
    return fitted;
  }
};

}  // namespace

std::shared_ptr<const data::SamplePipeline> sample_pipeline() { return std::make_shared<RtdetrPipeline>(); }

}  // namespace libreyolo::models::rtdetr
