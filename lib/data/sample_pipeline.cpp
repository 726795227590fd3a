#include "data/sample_pipeline.h"

#include "data/augment/mosaic_mixup.h"

#include <array>
#include <tuple>
#include <utility>

namespace libreyolo::data {

AugmentConfig AugmentConfig::from_config(const config::Config& config) {
  AugmentConfig augment;
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

std::size_t SampleDraw::partner() {
  if (pool.empty()) return static_cast<std::size_t>(random.integer(0, static_cast<int>(dataset.size()) - 1));
  return pool[static_cast<std::size_t>(random.integer(0, static_cast<int>(pool.size()) - 1))];
}

PiecedImage draw_mosaic4(SampleDraw& draw, std::size_t index, bool shuffle) {
  SampleRandom& random = draw.random;
  const int s = draw.augment.image_size;
  // Ultralytics draws yc then xc in U(s/2, 3s/2); YOLOX the same range, also y first.
  const int yc = static_cast<int>(random.uniform(0.5 * s, 1.5 * s));
  const int xc = static_cast<int>(random.uniform(0.5 * s, 1.5 * s));
  std::array<std::size_t, 4> indices{index, draw.partner(), draw.partner(), draw.partner()};
  if (shuffle) {  // load_mosaic's random.shuffle(indices): the sample's image in any tile
    for (int i = 3; i > 0; --i) std::swap(indices[i], indices[random.integer(0, i)]);
  }
  std::array<Sample, 4> tiles;
  for (int i = 0; i < 4; ++i) tiles[i] = draw.dataset.load_resized(indices[i]);
  return mosaic4_pieces(tiles, cv::Size(s, s), xc, yc);
}

}  // namespace libreyolo::data
