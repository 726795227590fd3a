// The SSD-style strong augmentations D-FINE and DEIM train with, as torchvision.transforms.v2 defines
// them (RandomPhotometricDistort, RandomZoomOut, RandomIoUCrop, SanitizeBoundingBoxes) and
// libreyolo 1.6.0 composes them: photometric distortion, zoom-out onto a black canvas, an IoU-bounded
// crop, then boxes under 1 px dropped. docs/detr-reference-notes.md has the parameters.
#pragma once

#include "data/sample.h"
#include "data/sample_random.h"

#include <opencv2/core/mat.hpp>

#include <array>
#include <optional>
#include <vector>

namespace libreyolo::data {

// RandomPhotometricDistort's draws: brightness U(0.875, 1.125), contrast U(0.5, 1.5) (before
// saturation or after hue, even odds), saturation U(0.5, 1.5), hue U(-0.05, 0.05) of a turn, each
// with probability `p`, then a channel permutation (of the image's channels) with probability `p`.
struct PhotometricDraw {
  std::optional<double> brightness, contrast, saturation, hue;
  bool contrast_first = true;
  std::optional<std::array<int, 3>> permutation;  // output channel c = input channel permutation[c]
};
PhotometricDraw draw_photometric(SampleRandom& random, double p = 0.5);

// The draw applied in torchvision's order with its uint8 arithmetic (blends in float32, clamped and
// truncated; grey = floor(0.2989 R + 0.587 G + 0.114 B); hue through float HSV, back as
// x * (256 - 1e-3) truncated). Returns a new image; `bgr` is never written to (it may be cached).
cv::Mat apply_photometric(const cv::Mat& bgr, const PhotometricDraw& draw);

inline cv::Mat photometric_distort(const cv::Mat& bgr, SampleRandom& random, double p = 0.5) {
  return apply_photometric(bgr, draw_photometric(random, p));
}

// An image placed on a black canvas (the zoom-out) and the window of that canvas that is kept (the
// crop). Kept as a placement until painted, so the canvas, up to 16 times the image, is never filled.
struct FramedSample {
  cv::Mat image;                // the source pixels (never written to)
  cv::Point offset{0, 0};       // the image's top-left on the canvas
  cv::Rect window;              // the output, in canvas pixels
  std::vector<PixelBox> boxes;  // in window pixels

  static FramedSample of(Sample sample);
  // The window as an image: the canvas's black with the image's part; a view of `image` where the
  // window lies inside it (not to be written to).
  Sample paint() const;
};

// RandomZoomOut(fill=0, side_range=(1, 4)), applied with probability `p`: the canvas is
// int(w r) x int(h r), r ~ U(1, 4), the image at int((cw - w) u0), int((ch - h) u1). Before any crop.
void zoom_out(FramedSample& framed, SampleRandom& random, double p = 0.5);

// RandomIoUCrop with the default options: an overlap bound drawn from {0, .1, .3, .5, .7, .9, 1}
// (1: no crop); up to 40 trials of a crop of U(.3, 1) of each side with aspect in [0.5, 2] that
// holds a box's centre strictly inside, the best IoU of such boxes with the crop at least the
// bound; else a new bound. Boxes whose centres lie outside are dropped, the rest clamped to the
// crop. Returns whether it cropped.
bool iou_crop(FramedSample& framed, SampleRandom& random);

// SanitizeBoundingBoxes(min_size=1): keeps boxes with w >= 1, h >= 1, area >= 1 inside `bounds`.
void sanitize_boxes(std::vector<PixelBox>& boxes, cv::Size bounds);

}  // namespace libreyolo::data
