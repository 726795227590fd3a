#include "data/augment/color.h"

#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <array>
#include <cmath>

namespace libreyolo::data {

namespace {

// One 3-channel LUT pass on the interleaved HSV image (no split/merge): the colour step is
// memory-bound, so fewer passes over the image is what makes it fast.
void apply_luts(cv::Mat& bgr, const std::array<cv::Mat, 3>& luts) {
  thread_local cv::Mat hsv;
  cv::Mat table;
  cv::merge(luts.data(), 3, table);
  cv::cvtColor(bgr, hsv, cv::COLOR_BGR2HSV);
  cv::LUT(hsv, table, hsv);
  cv::cvtColor(hsv, bgr, cv::COLOR_HSV2BGR);
}

cv::Mat lut_from(auto&& function) {
  cv::Mat lut(1, 256, CV_8U);
  for (int x = 0; x < 256; ++x) lut.at<std::uint8_t>(x) = static_cast<std::uint8_t>(function(x));
  return lut;
}

}  // namespace

void hsv_multiplicative(cv::Mat& bgr, double hue_gain, double saturation_gain, double value_gain, SampleRandom& random) {
  if (hue_gain == 0 && saturation_gain == 0 && value_gain == 0) return;
  const double r0 = random.uniform(-1, 1) * hue_gain + 1;
  const double r1 = random.uniform(-1, 1) * saturation_gain + 1;
  const double r2 = random.uniform(-1, 1) * value_gain + 1;
  // numpy: ((x * r) % 180).astype(uint8) and clip(x * r, 0, 255).astype(uint8) truncate toward 0
  apply_luts(bgr, {lut_from([&](int x) { return static_cast<int>(std::fmod(x * r0, 180.0)); }),
                   lut_from([&](int x) { return static_cast<int>(std::clamp(x * r1, 0.0, 255.0)); }),
                   lut_from([&](int x) { return static_cast<int>(std::clamp(x * r2, 0.0, 255.0)); })});
}

void hsv_additive(cv::Mat& bgr, double hue_gain, double saturation_gain, double value_gain, SampleRandom& random) {
  const double gains[3] = {hue_gain, saturation_gain, value_gain};
  double draws[3];
  for (double& draw : draws) draw = random.uniform(-1, 1);
  int deltas[3];
  for (int c = 0; c < 3; ++c) deltas[c] = static_cast<int>(draws[c] * gains[c] * random.integer(0, 1));
  apply_luts(bgr, {lut_from([&](int x) { return ((x + deltas[0]) % 180 + 180) % 180; }),
                   lut_from([&](int x) { return std::clamp(x + deltas[1], 0, 255); }),
                   lut_from([&](int x) { return std::clamp(x + deltas[2], 0, 255); })});
}

}  // namespace libreyolo::data
