#include "models/detr_common/dfine_pipeline.h"

#include "data/augment/geometry.h"
#include "data/augment/ssd.h"

namespace libreyolo::models::detr {

namespace {

using data::Sample;

class DfinePipeline final : public data::SamplePipeline {
 public:
  explicit DfinePipeline(bool original_size) : original_size_(original_size) {}
  std::string_view name() const override { return original_size_ ? "deim transform" : "d-fine transform"; }
  std::string_view strong_stage() const override { return "the photometric distortion, zoom-out and IoU crop"; }
  std::string ignored_options(const data::AugmentConfig& a) const override {
    const bool geometry_set = a.mosaic > 0 || a.mixup > 0 || a.degrees > 0 || a.shear > 0 || a.perspective > 0;
    if (geometry_set || a.translate > 0 || a.hsv_prob > 0) {
      return "mosaic, mixup, hsv_prob, degrees, translate, shear and perspective are ignored: D-FINE's and DEIM's "
             "pipeline (libreyolo 1.6.0's, which drops them too) has the photometric distortion, zoom-out and IoU "
             "crop until aug_stop_epoch_ratio of the epochs, then flips and the stretch";
    }
    return {};
  }

  // While the strong stage is on and the image has boxes, photometric distortion, zoom-out, IoU crop
  // and boxes under 1 px dropped; then always a horizontal flip and the stretch to the square
  // (area-averaged when it shrinks, as torchvision's antialiased resize), boxes not over 1 px on a
  // side dropped. No fallback when none is left: the reference trains on such a sample as it is.
  Sample sample(std::size_t index, data::SampleDraw& draw) const override {
    data::SampleRandom& random = draw.random;
    const data::AugmentConfig& augment = draw.augment;
    const cv::Size input(augment.image_size, augment.image_size);
    Sample image = original_size_ ? draw.dataset.load_original(index) : draw.dataset.load_resized(index);
    if (draw.strong && !image.boxes.empty()) {
      image.image = data::photometric_distort(image.image, random);  // a new image: the loaded one may be cached
      data::FramedSample framed = data::FramedSample::of(std::move(image));
      data::zoom_out(framed, random);
      data::iou_crop(framed, random);
      image = framed.paint();
      data::sanitize_boxes(image.boxes, image.image.size());
    }
    // flipped after the stretch (the same pixels, bilinear resizing being symmetric), on the fresh image
    const bool flip = random.chance(augment.flip_lr);
    const bool flip_vertical = random.chance(augment.flip_ud);
    Sample out = data::stretch_to(image, input, /*area_when_shrinking=*/true);
    if (flip) data::flip_horizontal_in_place(out);
    if (flip_vertical) data::flip_vertical_in_place(out);
    data::drop_small_boxes(out.boxes, input, 1.0f);
    return out;
  }

 private:
  bool original_size_;
};

}  // namespace

std::shared_ptr<const data::SamplePipeline> dfine_pipeline(bool original_size) { return std::make_shared<DfinePipeline>(original_size); }

}  // namespace libreyolo::models::detr
