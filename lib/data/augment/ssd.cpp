#include "data/augment/ssd.h"

#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <optional>

namespace libreyolo::data {

namespace {

// torchvision's uint8 blend, image.mul(ratio).add_(other, alpha=1 - ratio): float32, the add fused
// (ATen's vectorised add with alpha), clamped, truncated; 1 - ratio taken in double as Python does.
std::uint8_t blend(float x, float other, double ratio) {
  const float scaled = x * static_cast<float>(ratio);
  return static_cast<std::uint8_t>(std::clamp(std::fma(other, static_cast<float>(1.0 - ratio), scaled), 0.0f, 255.0f));
}

// floor(0.2989 R + 0.587 G + 0.114 B) of a BGR pixel, in float32 as torchvision computes it.
float grey(const std::uint8_t* bgr) {
  return std::floor(static_cast<float>(bgr[2]) * 0.2989f + static_cast<float>(bgr[1]) * 0.587f +
                    static_cast<float>(bgr[0]) * 0.114f);
}

cv::Mat through_table(const cv::Mat& image, auto&& function) {
  cv::Mat table(1, 256, CV_8U);
  for (int x = 0; x < 256; ++x) table.at<std::uint8_t>(x) = function(static_cast<float>(x));
  cv::Mat out;
  cv::LUT(image, table, out);
  return out;
}

cv::Mat brightness(const cv::Mat& image, double factor) {  // image.mul(factor), clamped, truncated
  return through_table(image, [factor](float x) {
    return static_cast<std::uint8_t>(std::clamp(x * static_cast<float>(factor), 0.0f, 255.0f));
  });
}

cv::Mat contrast(const cv::Mat& image, double factor) {
  double sum = 0;
  for (int row = 0; row < image.rows; ++row) {
    const std::uint8_t* pixel = image.ptr<std::uint8_t>(row);
    for (int column = 0; column < image.cols; ++column, pixel += 3) sum += grey(pixel);
  }
  const auto mean = static_cast<float>(sum / static_cast<double>(image.total()));
  return through_table(image, [factor, mean](float x) { return blend(x, mean, factor); });
}

cv::Mat saturation(const cv::Mat& image, double factor) {
  cv::Mat out(image.size(), CV_8UC3);
  for (int row = 0; row < image.rows; ++row) {
    const std::uint8_t* pixel = image.ptr<std::uint8_t>(row);
    std::uint8_t* target = out.ptr<std::uint8_t>(row);
    for (int column = 0; column < image.cols; ++column, pixel += 3, target += 3) {
      const float g = grey(pixel);
      for (int c = 0; c < 3; ++c) target[c] = blend(pixel[c], g, factor);
    }
  }
  return out;
}

// A hue rotation by `turn` of a full circle, through float HSV (OpenCV's: hue in degrees); back to
// uint8 as torchvision's to_dtype does, x * (255 + 1 - 1e-3) truncated.
cv::Mat hue(const cv::Mat& image, double turn) {
  cv::Mat values, hsv;
  image.convertTo(values, CV_32FC3, 1.0 / 255.0);
  cv::cvtColor(values, hsv, cv::COLOR_BGR2HSV);
  const auto shift = static_cast<float>(turn * 360.0);
  for (int row = 0; row < hsv.rows; ++row) {
    float* pixel = hsv.ptr<float>(row);
    for (int column = 0; column < hsv.cols; ++column, pixel += 3) {
      float h = std::fmod(pixel[0] + shift, 360.0f);
      pixel[0] = h < 0 ? h + 360.0f : h;
    }
  }
  cv::cvtColor(hsv, values, cv::COLOR_HSV2BGR);
  cv::Mat out(image.size(), CV_8UC3);
  for (int row = 0; row < out.rows; ++row) {
    const float* value = values.ptr<float>(row);
    std::uint8_t* target = out.ptr<std::uint8_t>(row);
    for (int i = 0; i < out.cols * 3; ++i) {
      target[i] = static_cast<std::uint8_t>(std::clamp(value[i], 0.0f, 1.0f) * (256.0f - 1e-3f));
    }
  }
  return out;
}

}  // namespace

PhotometricDraw draw_photometric(SampleRandom& random, double p) {
  // torchvision's order: each factor behind its own chance, then the contrast's place, then the permutation
  const auto factor = [&](double low, double high) -> std::optional<double> {
    if (!random.chance(p)) return std::nullopt;
    return random.uniform(low, high);
  };
  PhotometricDraw draw;
  draw.brightness = factor(0.875, 1.125);
  draw.contrast = factor(0.5, 1.5);
  draw.saturation = factor(0.5, 1.5);
  draw.hue = factor(-0.05, 0.05);
  draw.contrast_first = random.chance(0.5);
  if (random.chance(p)) {
    std::array<int, 3> permutation{0, 1, 2};
    for (int i = 2; i > 0; --i) std::swap(permutation[i], permutation[random.integer(0, i)]);
    draw.permutation = permutation;
  }
  return draw;
}

cv::Mat apply_photometric(const cv::Mat& bgr, const PhotometricDraw& draw) {
  cv::Mat out = bgr;  // each step below writes a new image
  if (draw.brightness) out = brightness(out, *draw.brightness);
  if (draw.contrast && draw.contrast_first) out = contrast(out, *draw.contrast);
  if (draw.saturation) out = saturation(out, *draw.saturation);
  if (draw.hue) out = hue(out, *draw.hue);
  if (draw.contrast && !draw.contrast_first) out = contrast(out, *draw.contrast);
  if (draw.permutation) {
    cv::Mat permuted(out.size(), CV_8UC3);
    const auto& order = *draw.permutation;
    const int from_to[] = {order[0], 0, order[1], 1, order[2], 2};
    cv::mixChannels(&out, 1, &permuted, 1, from_to, 3);
    out = permuted;
  }
  return out.data == bgr.data ? bgr.clone() : out;
}

FramedSample FramedSample::of(Sample sample) {
  FramedSample framed;
  framed.window = cv::Rect(0, 0, sample.image.cols, sample.image.rows);
  framed.image = std::move(sample.image);
  framed.boxes = std::move(sample.boxes);
  return framed;
}

Sample FramedSample::paint() const {
  Sample out;
  out.boxes = boxes;
  const cv::Rect placed(offset, image.size());
  const cv::Rect shared = placed & window;
  if (shared == window) {  // all image: no black to add, no copy to make
    out.image = image(window - offset);
    return out;
  }
  out.image = cv::Mat(window.size(), CV_8UC3, cv::Scalar::all(0));
  if (!shared.empty()) image(shared - offset).copyTo(out.image(shared - window.tl()));
  return out;
}

void zoom_out(FramedSample& framed, SampleRandom& random, double p) {
  if (!random.chance(p)) return;
  const int width = framed.window.width, height = framed.window.height;
  const double ratio = random.uniform(1.0, 4.0);
  const int canvas_width = static_cast<int>(width * ratio), canvas_height = static_cast<int>(height * ratio);
  const double u0 = random.uniform(0.0, 1.0), u1 = random.uniform(0.0, 1.0);
  const int left = static_cast<int>((canvas_width - width) * u0), top = static_cast<int>((canvas_height - height) * u1);
  // the image (the whole window: zoom-out comes before any crop) moves to (left, top) of the new canvas
  framed.offset = framed.offset - framed.window.tl() + cv::Point(left, top);
  framed.window = cv::Rect(0, 0, canvas_width, canvas_height);
  for (auto& box : framed.boxes) {
    box.x1 += static_cast<float>(left), box.x2 += static_cast<float>(left);
    box.y1 += static_cast<float>(top), box.y2 += static_cast<float>(top);
  }
}

bool iou_crop(FramedSample& framed, SampleRandom& random) {
  static constexpr std::array<double, 7> kOptions{0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0};
  const int width = framed.window.width, height = framed.window.height;
  std::vector<char> inside(framed.boxes.size());
  // torchvision draws bounds until one is met; the bound here only ends a search that cannot succeed
  // (no box centre strictly inside the image), where its 1.0 option would end it in time too
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const double bound = kOptions[static_cast<std::size_t>(random.integer(0, static_cast<int>(kOptions.size()) - 1))];
    if (bound >= 1.0) return false;
    for (int trial = 0; trial < 40; ++trial) {
      const double r0 = random.uniform(0.3, 1.0), r1 = random.uniform(0.3, 1.0);
      const int crop_width = static_cast<int>(width * r0), crop_height = static_cast<int>(height * r1);
      if (crop_height == 0) continue;  // (a zero width fails the aspect test)
      const double aspect = static_cast<double>(crop_width) / crop_height;
      if (aspect < 0.5 || aspect > 2.0) continue;
      const double u0 = random.uniform(0.0, 1.0), u1 = random.uniform(0.0, 1.0);
      const int left = static_cast<int>((width - crop_width) * u0), top = static_cast<int>((height - crop_height) * u1);
      const int right = left + crop_width, bottom = top + crop_height;
      double best = -1;
      for (std::size_t i = 0; i < framed.boxes.size(); ++i) {
        const PixelBox& box = framed.boxes[i];
        const double cx = 0.5 * (box.x1 + box.x2), cy = 0.5 * (box.y1 + box.y2);
        inside[i] = left < cx && cx < right && top < cy && cy < bottom;
        if (!inside[i]) continue;
        const double iw = std::max(0.0, std::min<double>(box.x2, right) - std::max<double>(box.x1, left));
        const double ih = std::max(0.0, std::min<double>(box.y2, bottom) - std::max<double>(box.y1, top));
        const double intersection = iw * ih;
        const double united = static_cast<double>(box.width()) * box.height() + static_cast<double>(crop_width) * crop_height - intersection;
        best = std::max(best, united > 0 ? intersection / united : 0.0);
      }
      if (best < 0 || best < bound) continue;  // no centre inside, or no overlap as large as the bound
      std::vector<PixelBox> kept;
      for (std::size_t i = 0; i < framed.boxes.size(); ++i) {
        if (!inside[i]) continue;
        PixelBox box = framed.boxes[i];
        box.x1 = std::clamp(box.x1 - static_cast<float>(left), 0.0f, static_cast<float>(crop_width));
        box.x2 = std::clamp(box.x2 - static_cast<float>(left), 0.0f, static_cast<float>(crop_width));
        box.y1 = std::clamp(box.y1 - static_cast<float>(top), 0.0f, static_cast<float>(crop_height));
        box.y2 = std::clamp(box.y2 - static_cast<float>(top), 0.0f, static_cast<float>(crop_height));
        kept.push_back(box);
      }
      framed.boxes = std::move(kept);
      framed.window = cv::Rect(framed.window.x + left, framed.window.y + top, crop_width, crop_height);
      return true;
    }
  }
  return false;
}

void sanitize_boxes(std::vector<PixelBox>& boxes, cv::Size bounds) {
  const auto width = static_cast<float>(bounds.width), height = static_cast<float>(bounds.height);
  std::erase_if(boxes, [&](const PixelBox& box) {
    const float w = box.width(), h = box.height();
    const bool valid = w >= 1 && h >= 1 && w * h >= 1 && box.x1 >= 0 && box.y1 >= 0 && box.x2 >= 0 && box.y2 >= 0 &&
                       box.x1 <= width && box.x2 <= width && box.y1 <= height && box.y2 <= height;
    return !valid;
  });
}

}  // namespace libreyolo::data
