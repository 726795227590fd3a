// Colour jitter in OpenCV's 8-bit HSV: multiplicative gains (Ultralytics/YOLOv9) or YOLOX's
// additive deltas, each applied through lookup tables.
#pragma once

#include "data/sample_random.h"

#include <opencv2/core/mat.hpp>

namespace libreyolo::data {

// r = U(-1,1)*gain + 1 per channel; hue = (h*r0) % 180, s/v clipped. In place.
void hsv_multiplicative(cv::Mat& bgr, double hue_gain, double saturation_gain, double value_gain, SampleRandom& random);

// d = U(-1,1)*gain, each kept with probability 1/2; hue = (h+d0) % 180, s/v clipped. In place.
void hsv_additive(cv::Mat& bgr, double hue_gain, double saturation_gain, double value_gain, SampleRandom& random);

}  // namespace libreyolo::data
