// Geometric augmentations and their box bookkeeping: resizing, letterbox (centred, as
// Ultralytics), top-left fit (as YOLOX) and stretch (as the DETRs), the Ultralytics random perspective and the YOLOX
// random affine, flips, and the candidate filter that drops boxes squashed by a transform.
#pragma once

#include "data/sample.h"
#include "data/sample_random.h"

#include <opencv2/core/types.hpp>

namespace libreyolo::data {

// Resize so the long side is `long_side` (Ultralytics load_image); boxes follow.
Sample resize_long_side(const Sample& sample, int long_side);

struct LetterboxResult {
  Sample sample;
  double ratio = 1;           // resize factor applied to the input
  cv::Point2d pad;            // left/top padding added after resizing
};

// Ultralytics LetterBox(center=True): fit into `shape` keeping the ratio, pad with 114.
LetterboxResult letterbox(const Sample& sample, cv::Size shape, bool scale_up = true);

// YOLOX preproc: fit into `shape`, place at the top-left on a 114 canvas.
LetterboxResult fit_top_left(const Sample& sample, cv::Size shape);

// The DETRs' resize: stretched to `shape` (bilinear), each axis scaled on its own; boxes follow.
// `area_when_shrinking`: area-averaged where both axes shrink (torchvision's antialiased resize).
// Always a new image.
Sample stretch_to(const Sample& sample, cv::Size shape, bool area_when_shrinking = false);

struct PerspectiveParams {
  double degrees = 0, translate = 0.1, scale_low = 0.5, scale_high = 1.5, shear = 0, perspective = 0;
};

// An image given as pieces on a canvas of 114 (a mosaic before it is painted): each piece's
// pixels sit at `canvas_rect`. A single image is one piece covering the canvas.
struct CanvasPiece {
  cv::Mat pixels;
  cv::Rect canvas_rect;
};

struct PiecedImage {
  cv::Size canvas;
  std::vector<CanvasPiece> pieces;
  std::vector<PixelBox> boxes;  // in canvas pixels
  cv::Mat paint() const;        // the canvas as one image
};

// Ultralytics RandomPerspective: M = T*S*R*P*C, output `output_size`, then boxes filtered by
// box_candidates. `scale_low/high` are the scale range (LibreYOLO's mosaic_scale). Without
// rotation, shear and perspective the pieces are resized straight into the output: no canvas
// is painted and no per-pixel warp runs.
Sample random_perspective(const PiecedImage& image, const PerspectiveParams& params, cv::Size output_size,
                          SampleRandom& random);
Sample random_perspective(const Sample& sample, const PerspectiveParams& params, cv::Size output_size,
                          SampleRandom& random);

// YOLOX random_affine: rotation + scale about the origin, shear, translation; output window is
// the top-left `output_size` of the transformed image.
Sample random_affine(const Sample& sample, const PerspectiveParams& params, cv::Size output_size,
                           SampleRandom& random);

// Applies a 3x3 matrix to boxes (corners -> min/max) and clips them to `bounds`.
std::vector<PixelBox> transform_boxes(const std::vector<PixelBox>& boxes, const cv::Matx33d& matrix, cv::Size bounds);

// Ultralytics box_candidates: kept if w,h > 2 px, area ratio > area_threshold, aspect < 100.
bool box_candidate(const PixelBox& before_scaled, const PixelBox& after, double area_threshold = 0.1);

Sample flip_horizontal(const Sample& sample);
Sample flip_vertical(const Sample& sample);
// In place, for an image the caller owns (not one shared with a cache).
void flip_horizontal_in_place(Sample& sample);
void flip_vertical_in_place(Sample& sample);

// Drops boxes whose clipped width or height is not above `min_side` pixels.
void drop_small_boxes(std::vector<PixelBox>& boxes, cv::Size bounds, float min_side);

}  // namespace libreyolo::data
