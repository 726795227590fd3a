#include "data/augment/mosaic_mixup.h"

#include <opencv2/imgproc.hpp>

#include <algorithm>

namespace libreyolo::data {

Sample mosaic4(const std::array<Sample, 4>& tiles, cv::Size tile_size, int xc, int yc) {
  const PiecedImage pieces = mosaic4_pieces(tiles, tile_size, xc, yc);
  return Sample{pieces.paint(), pieces.boxes};
}

PiecedImage mosaic4_pieces(const std::array<Sample, 4>& tiles, cv::Size tile_size, int xc, int yc) {
  const int canvas_w = 2 * tile_size.width;
  const int canvas_h = 2 * tile_size.height;
  PiecedImage out;
  out.canvas = cv::Size(canvas_w, canvas_h);
  for (int i = 0; i < 4; ++i) {
    const int w = tiles[i].image.cols;
    const int h = tiles[i].image.rows;
    int x1a = 0, y1a = 0, x2a = 0, y2a = 0, x1b = 0, y1b = 0, x2b = 0, y2b = 0;
    if (i == 0) {  // top-left
      x1a = std::max(xc - w, 0), y1a = std::max(yc - h, 0), x2a = xc, y2a = yc;
      x1b = w - (x2a - x1a), y1b = h - (y2a - y1a), x2b = w, y2b = h;
    } else if (i == 1) {  // top-right
      x1a = xc, y1a = std::max(yc - h, 0), x2a = std::min(xc + w, canvas_w), y2a = yc;
      x1b = 0, y1b = h - (y2a - y1a), x2b = std::min(w, x2a - x1a), y2b = h;
    } else if (i == 2) {  // bottom-left
      x1a = std::max(xc - w, 0), y1a = yc, x2a = xc, y2a = std::min(canvas_h, yc + h);
      x1b = w - (x2a - x1a), y1b = 0, x2b = w, y2b = std::min(y2a - y1a, h);
    } else {  // bottom-right
      x1a = xc, y1a = yc, x2a = std::min(xc + w, canvas_w), y2a = std::min(canvas_h, yc + h);
      x1b = 0, y1b = 0, x2b = std::min(w, x2a - x1a), y2b = std::min(y2a - y1a, h);
    }
    if (x2a > x1a && y2a > y1a) {
      out.pieces.push_back({tiles[i].image(cv::Rect(x1b, y1b, x2b - x1b, y2b - y1b)), cv::Rect(x1a, y1a, x2a - x1a, y2a - y1a)});
    }
    const float pad_w = static_cast<float>(x1a - x1b);
    const float pad_h = static_cast<float>(y1a - y1b);
    for (const auto& box : tiles[i].boxes) {
      PixelBox moved{box.cls, std::clamp(box.x1 + pad_w, 0.f, static_cast<float>(canvas_w)),
                     std::clamp(box.y1 + pad_h, 0.f, static_cast<float>(canvas_h)),
                     std::clamp(box.x2 + pad_w, 0.f, static_cast<float>(canvas_w)),
                     std::clamp(box.y2 + pad_h, 0.f, static_cast<float>(canvas_h))};
      if (moved.width() > 0 && moved.height() > 0) out.boxes.push_back(moved);
    }
  }
  return out;
}

Sample mixup_beta(const Sample& a, const Sample& b, SampleRandom& random) {
  const double r = random.beta(32.0, 32.0);
  Sample out;
  cv::addWeighted(a.image, r, b.image, 1.0 - r, 0.0, out.image);
  out.boxes = a.boxes;
  out.boxes.insert(out.boxes.end(), b.boxes.begin(), b.boxes.end());
  return out;
}

Sample mixup_jittered_paste(const Sample& base, const Sample& partner, const JitterMixupParams& params, SampleRandom& random) {
  const double jitter = random.uniform(params.scale_low, params.scale_high);
  const bool flip = random.uniform(0.0, 1.0) > 0.5;
  const cv::Size input = base.image.size();

  // fit-resize the partner top-left onto a 114 canvas of the input size, then jitter its scale
  double ratio = std::min(static_cast<double>(input.height) / partner.image.rows,
                          static_cast<double>(input.width) / partner.image.cols);
  cv::Mat canvas(input, CV_8UC3, cv::Scalar(kPadValue, kPadValue, kPadValue));
  cv::Mat resized;
  const cv::Size fitted(static_cast<int>(partner.image.cols * ratio), static_cast<int>(partner.image.rows * ratio));
  cv::resize(partner.image, resized, fitted, 0, 0, cv::INTER_LINEAR);
  resized.copyTo(canvas(cv::Rect(cv::Point(0, 0), fitted)));
  cv::Mat jittered;
  cv::resize(canvas, jittered, cv::Size(static_cast<int>(canvas.cols * jitter), static_cast<int>(canvas.rows * jitter)), 0,
             0, cv::INTER_LINEAR);
  ratio *= jitter;
  if (flip) cv::flip(jittered, jittered, 1);

  const int origin_w = jittered.cols;
  const int origin_h = jittered.rows;
  cv::Mat padded = cv::Mat::zeros(std::max(origin_h, input.height), std::max(origin_w, input.width), CV_8UC3);
  jittered.copyTo(padded(cv::Rect(0, 0, origin_w, origin_h)));
  const int y_offset = padded.rows > input.height ? random.integer(0, padded.rows - input.height - 1) : 0;
  const int x_offset = padded.cols > input.width ? random.integer(0, padded.cols - input.width - 1) : 0;
  const cv::Mat cropped = padded(cv::Rect(x_offset, y_offset, input.width, input.height));

  Sample out;
  cv::addWeighted(base.image, 0.5, cropped, 0.5, 0.0, out.image);
  out.boxes = base.boxes;
  for (const auto& box : partner.boxes) {
    float x1 = std::clamp(static_cast<float>(box.x1 * ratio), 0.f, static_cast<float>(origin_w));
    float x2 = std::clamp(static_cast<float>(box.x2 * ratio), 0.f, static_cast<float>(origin_w));
    const float y1 = std::clamp(static_cast<float>(box.y1 * ratio), 0.f, static_cast<float>(origin_h));
    const float y2 = std::clamp(static_cast<float>(box.y2 * ratio), 0.f, static_cast<float>(origin_h));
    if (flip) {
      const float flipped_x1 = static_cast<float>(origin_w) - x2;
      x2 = static_cast<float>(origin_w) - x1;
      x1 = flipped_x1;
    }
    const auto clip = [](float v, int hi) { return std::clamp(v, 0.f, static_cast<float>(hi)); };
    out.boxes.push_back({box.cls, clip(x1 - x_offset, input.width), clip(y1 - y_offset, input.height),
                         clip(x2 - x_offset, input.width), clip(y2 - y_offset, input.height)});
  }
  return out;
}

}  // namespace libreyolo::data
