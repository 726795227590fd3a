// Four-image mosaic (the tile arithmetic both references share) and the two mixups:
// Ultralytics' Beta(32,32) blend of two augmented samples and YOLOX's fixed 0.5 blend of a
// rescaled, jittered partner.
#pragma once

#include "data/augment/geometry.h"
#include "data/sample.h"
#include "data/sample_random.h"

#include <array>

namespace libreyolo::data {

// Places tiles[0..3] around (center_x, center_y) on a (2*tile_size) canvas filled with 114:
// top-left, top-right, bottom-left, bottom-right. Boxes are shifted, clipped to the canvas
// and zero-area boxes dropped.
Sample mosaic4(const std::array<Sample, 4>& tiles, cv::Size tile_size, int center_x, int center_y);

// The same mosaic as pieces, not yet painted (random_perspective can resize them straight
// into its output).
PiecedImage mosaic4_pieces(const std::array<Sample, 4>& tiles, cv::Size tile_size, int center_x, int center_y);

// img = a*r + b*(1-r), r ~ Beta(32, 32); labels of both.
Sample mixup_beta(const Sample& a, const Sample& b, SampleRandom& random);

struct JitterMixupParams {
  double scale_low = 0.5, scale_high = 1.5;
};

// YOLOX MosaicDetection.mixup: `partner` fit-resized onto a 114 canvas, scaled by a jitter,
// flipped half the time, cropped at a random offset to the size of `base`, then 0.5/0.5.
Sample mixup_jittered_paste(const Sample& base, const Sample& partner, const JitterMixupParams& params, SampleRandom& random);

}  // namespace libreyolo::data
