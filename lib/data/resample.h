// Pillow's resampling (Image.resize with a filter), which torchvision's transforms run on the PIL
// images libreyolo 1.6.0's classifiers train and validate on: a separable convolution whose
// support widens with the reduction (so a downscale is antialiased, unlike OpenCV's INTER_CUBIC),
// in 22-bit fixed point, the passes in Pillow 13's order. Same pixels in, same pixels out as
// Pillow 13 (parity_classify_views checks it against the test venv's). 8-bit images of 1 to 4 channels.
#pragma once

#include <opencv2/core/mat.hpp>
#include <opencv2/core/types.hpp>

namespace libreyolo::data {

enum class ResampleFilter { bilinear, bicubic };

// `source`'s region `box` (x0, y0, x1, y1 in source pixels, fractional allowed: Pillow's `box=`)
// resized to `size`.
cv::Mat pillow_resize(const cv::Mat& source, cv::Size size, ResampleFilter filter, cv::Rect2d box);
// The whole image resized to `size`.
cv::Mat pillow_resize(const cv::Mat& source, cv::Size size, ResampleFilter filter);

}  // namespace libreyolo::data
