// One training sample while it moves through the augmentations: a BGR image and its boxes in
// pixel corners (x1, y1, x2, y2) of that image.
#pragma once

#include <opencv2/core/mat.hpp>

#include <vector>

namespace libreyolo::data {

struct PixelBox {
  int cls = 0;
  float x1 = 0, y1 = 0, x2 = 0, y2 = 0;
  float width() const { return x2 - x1; }
  float height() const { return y2 - y1; }
};

struct Sample {
  cv::Mat image;  // 8-bit BGR
  std::vector<PixelBox> boxes;
};

// The grey both reference pipelines pad with.
inline constexpr int kPadValue = 114;

}  // namespace libreyolo::data
