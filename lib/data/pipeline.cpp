#include "data/pipeline.h"

#include "data/augment/color.h"
#include "data/augment/geometry.h"
#include "data/augment/mosaic_mixup.h"
#include "data/augment/ssd.h"


namespace libreyolo::data {

std::string_view recipe_name(Recipe recipe) {
  switch (recipe) {
    case Recipe::yolo9: return "yolo9";
    case Recipe::yolov5: return "yolov5";
    case Recipe::yolox: return "yolox";
    case Recipe::detr: return "detr";
    case Recipe::dfine: return "dfine";
    case Recipe::deim: return "deim";
  }
  return "?";
}

AugmentConfig AugmentConfig::from_config(const config::Config& config, Recipe recipe) {
  AugmentConfig augment;
  augment.recipe = recipe;
  const auto size = config.get_image_size("imgsz");
  augment.image_size = std::max(size.height, size.width);
  augment.mosaic = config.get_real("mosaic");
  augment.mixup = config.get_real("mixup");
  augment.hsv_prob = config.get_real("hsv_prob");
  augment.hue = config.get_real("hsv_hue");
  augment.saturation = config.get_real("hsv_saturation");
  augment.value = config.get_real("hsv_value");
  augment.flip_lr = config.get_real("flip_prob");
  augment.flip_ud = config.get_real("flipud");
  augment.degrees = config.get_real("degrees");
  augment.translate = config.get_real("translate");
  augment.shear = config.get_real("shear");
  augment.perspective = config.get_real("perspective");
  std::tie(augment.scale_low, augment.scale_high) = config.get_pair("mosaic_scale");
  std::tie(augment.mixup_scale_low, augment.mixup_scale_high) = config.get_pair("mixup_scale");
  augment.max_labels = static_cast<int>(config.get_int("max_labels"));
  return augment;
}

TrainPipeline::TrainPipeline(const DetectionDataset& dataset, AugmentConfig augment, std::uint64_t seed)
    : dataset_(dataset), augment_(std::move(augment)), seed_(seed) {}

std::size_t TrainPipeline::Draw::partner() {
  if (pool.empty()) return static_cast<std::size_t>(random.integer(0, static_cast<int>(dataset_size) - 1));
  return pool[static_cast<std::size_t>(random.integer(0, static_cast<int>(pool.size()) - 1))];
}

Sample TrainPipeline::sample(std::size_t index, int epoch, std::span<const std::size_t> pool) const {
  SampleRandom random(seed_, static_cast<std::uint64_t>(epoch), index);
  // a pool too small to mix well, or YOLOv5's mosaic: partners come from the whole dataset (same
  // draws, no index list)
  if (pool.size() < 4 || augment_.recipe == Recipe::yolov5) pool = {};
  Draw draw{random, pool, dataset_.size()};
  Sample out;
  switch (augment_.recipe) {
    case Recipe::yolo9:
    case Recipe::yolov5: out = yolo9_sample(index, draw); break;
    case Recipe::yolox: out = yolox_sample(index, draw); break;
    case Recipe::detr: out = detr_sample(index, draw); break;
    case Recipe::dfine:
    case Recipe::deim: out = dfine_sample(index, draw); break;
  }
  if (static_cast<int>(out.boxes.size()) > augment_.max_labels) out.boxes.resize(augment_.max_labels);
  return out;
}

Sample TrainPipeline::mosaic_of(std::size_t index, Draw& draw) const {
  const PiecedImage pieces = mosaic_pieces_of(index, draw);
  return Sample{pieces.paint(), pieces.boxes};
}

PiecedImage TrainPipeline::mosaic_pieces_of(std::size_t index, Draw& draw) const {
  SampleRandom& random = draw.random;
  const int s = augment_.image_size;
  // Ultralytics draws yc then xc in U(s/2, 3s/2); YOLOX the same range, also y first.
  const int yc = static_cast<int>(random.uniform(0.5 * s, 1.5 * s));
  const int xc = static_cast<int>(random.uniform(0.5 * s, 1.5 * s));
  std::array<std::size_t, 4> indices{index, draw.partner(), draw.partner(), draw.partner()};
  if (augment_.recipe == Recipe::yolov5) {  // load_mosaic's random.shuffle(indices): the sample's image in any tile
    for (int i = 3; i > 0; --i) std::swap(indices[i], indices[random.integer(0, i)]);
  }
  std::array<Sample, 4> tiles;
  for (int i = 0; i < 4; ++i) tiles[i] = dataset_.load_resized(indices[i]);
  return mosaic4_pieces(tiles, cv::Size(s, s), xc, yc);
}

Sample TrainPipeline::yolo9_geometric(std::size_t index, Draw& draw, bool use_mosaic) const {
  SampleRandom& random = draw.random;
  const int s = augment_.image_size;
  const PerspectiveParams params{augment_.degrees, augment_.translate, augment_.scale_low,
                                 augment_.scale_high, augment_.shear, augment_.perspective};
  if (use_mosaic) return random_perspective(mosaic_pieces_of(index, draw), params, cv::Size(s, s), random);
  const auto boxed = letterbox(dataset_.load_resized(index), cv::Size(s, s));
  return random_perspective(boxed.sample, params, cv::Size(s, s), random);
}

Sample TrainPipeline::yolo9_sample(std::size_t index, Draw& draw) const {
  SampleRandom& random = draw.random;
  const bool use_mosaic = mosaic_enabled_ && random.chance(augment_.mosaic);
  Sample out = yolo9_geometric(index, draw, use_mosaic);
  if (mosaic_enabled_ && random.chance(augment_.mixup)) {
    const std::size_t partner = draw.partner();
    SampleRandom partner_random = random.split();
    Draw partner_draw{partner_random, draw.pool, draw.dataset_size};
    out = mixup_beta(out, yolo9_geometric(partner, partner_draw, use_mosaic), random);
  }
  // the geometric step always produced a fresh image, so colour work can be in place
  if (random.chance(augment_.hsv_prob)) {
    hsv_multiplicative(out.image, augment_.hue, augment_.saturation, augment_.value, random);
  }
  if (random.chance(augment_.flip_ud)) flip_vertical_in_place(out);
  if (random.chance(augment_.flip_lr)) flip_horizontal_in_place(out);
  return out;
}

Sample TrainPipeline::yolox_sample(std::size_t index, Draw& draw) const {
  SampleRandom& random = draw.random;
  const int s = augment_.image_size;
  const cv::Size input(s, s);
  Sample out;
  if (mosaic_enabled_ && random.chance(augment_.mosaic)) {
    const PerspectiveParams params{augment_.degrees, augment_.translate, augment_.scale_low,
                                   augment_.scale_high, augment_.shear, 0.0};
    out = yolox_random_affine(mosaic_of(index, draw), params, input, random);
    if (!out.boxes.empty() && random.chance(augment_.mixup)) {
      // YOLOX draws partners until one has labels; bounded here for label-less datasets.
      for (int attempt = 0; attempt < 32; ++attempt) {
        const std::size_t partner = draw.partner();
        if (dataset_.record(partner).boxes.empty()) continue;
        out = mixup_yolox(out, dataset_.load_resized(partner), {augment_.mixup_scale_low, augment_.mixup_scale_high},
                          random);
        break;
      }
    }
  } else {
    out = dataset_.load_resized(index);
    out.image = out.image.clone();  // may be a cached image: HSV below works in place
  }

  // TrainTransform
  if (out.boxes.empty()) return fit_top_left(out, input).sample;
  const Sample original = {out.image.clone(), out.boxes};
  if (random.chance(augment_.hsv_prob)) hsv_additive(out.image, 5, 30, 30, random);
  if (random.chance(augment_.flip_lr)) flip_horizontal_in_place(out);
  Sample fitted = fit_top_left(out, input).sample;
  drop_small_boxes(fitted.boxes, input, 1.0f);
  if (fitted.boxes.empty()) {  // every box vanished: fall back to the un-augmented sample
    fitted = fit_top_left(original, input).sample;
    drop_small_boxes(fitted.boxes, input, 1.0f);
  }
  return fitted;
}

// LibreYOLO's RT-DETR transform: additive HSV and flips on the image at its own size (decoded for
// each sample: cache= does not apply), then stretched to the square; boxes not over 1 px on a side
// dropped, and where none is left, the un-augmented image instead.
Sample TrainPipeline::detr_sample(std::size_t index, Draw& draw) const {
  SampleRandom& random = draw.random;
  const cv::Size input(augment_.image_size, augment_.image_size);
  Sample out = dataset_.load_original(index);  // one resize, the stretch (LibreYOLO's wants_unresized_image)
  const bool had_boxes = !out.boxes.empty();
  if (random.chance(augment_.hsv_prob)) hsv_additive(out.image, 5, 30, 30, random);  // in place: a fresh decode
  if (random.chance(augment_.flip_lr)) flip_horizontal_in_place(out);
  if (random.chance(augment_.flip_ud)) flip_vertical_in_place(out);
  Sample fitted = stretch_to(out, input);
  if (!had_boxes) return fitted;
  drop_small_boxes(fitted.boxes, input, 1.0f);
  // rare: decoded again rather than an untouched copy kept for every sample
  if (fitted.boxes.empty()) fitted = stretch_to(dataset_.load_original(index), input);
  return fitted;
}

// D-FINE's and DEIM's (libreyolo 1.6.0's DETR transform): while the strong stage is on and the image
// has boxes, photometric distortion, zoom-out, IoU crop and boxes under 1 px dropped; then always a
// horizontal flip and the stretch to the square (area-averaged when it shrinks, as torchvision's
// antialiased resize), boxes not over 1 px on a side dropped. No fallback when none is left: the
// reference trains on such a sample as it is.
Sample TrainPipeline::dfine_sample(std::size_t index, Draw& draw) const {
  SampleRandom& random = draw.random;
  const cv::Size input(augment_.image_size, augment_.image_size);
  Sample image = augment_.recipe == Recipe::deim ? dataset_.load_original(index) : dataset_.load_resized(index);
  if (mosaic_enabled_ && !image.boxes.empty()) {
    image.image = photometric_distort(image.image, random);  // a new image: the loaded one may be cached
    FramedSample framed = FramedSample::of(std::move(image));
    zoom_out(framed, random);
    iou_crop(framed, random);
    image = framed.paint();
    sanitize_boxes(image.boxes, image.image.size());
  }
  // flipped after the stretch (the same pixels, bilinear resizing being symmetric), on the fresh image
  const bool flip = random.chance(augment_.flip_lr);
  const bool flip_vertical = random.chance(augment_.flip_ud);
  Sample out = stretch_to(image, input, /*area_when_shrinking=*/true);
  if (flip) flip_horizontal_in_place(out);
  if (flip_vertical) flip_vertical_in_place(out);
  drop_small_boxes(out.boxes, input, 1.0f);
  return out;
}

std::string_view TrainPipeline::strong_stage() const {
  switch (augment_.recipe) {
    case Recipe::dfine:
    case Recipe::deim: return "the photometric distortion, zoom-out and IoU crop";
    case Recipe::detr: return {};  // RT-DETR's pipeline has no strong stage
    default: return "mosaic and mixup";
  }
}

}  // namespace libreyolo::data
