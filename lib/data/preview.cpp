#include "data/preview.h"

#include <opencv2/imgproc.hpp>

#include <cmath>

namespace libreyolo::data {

namespace {

// Distinct, stable colours per class (golden-angle hue steps).
cv::Scalar class_colour(int cls) {
  cv::Mat hsv(1, 1, CV_8UC3, cv::Scalar((cls * 37) % 180, 220, 255));
  cv::Mat bgr;
  cv::cvtColor(hsv, bgr, cv::COLOR_HSV2BGR);
  const auto pixel = bgr.at<cv::Vec3b>(0, 0);
  return cv::Scalar(pixel[0], pixel[1], pixel[2]);
}

}  // namespace

cv::Mat draw_sample(const Sample& sample, const std::vector<std::string>& names) {
  cv::Mat canvas = sample.image.clone();
  const int thickness = std::max(1, canvas.cols / 320);
  for (const auto& box : sample.boxes) {
    const cv::Scalar colour = class_colour(box.cls);
    const cv::Point top_left(static_cast<int>(std::lround(box.x1)), static_cast<int>(std::lround(box.y1)));
    const cv::Point bottom_right(static_cast<int>(std::lround(box.x2)), static_cast<int>(std::lround(box.y2)));
    cv::rectangle(canvas, top_left, bottom_right, colour, thickness, cv::LINE_AA);
    const std::string label =
        box.cls >= 0 && box.cls < static_cast<int>(names.size()) ? names[box.cls] : std::to_string(box.cls);
    const double scale = 0.4 * thickness;
    int baseline = 0;
    const cv::Size text = cv::getTextSize(label, cv::FONT_HERSHEY_SIMPLEX, scale, 1, &baseline);
    const cv::Point origin(top_left.x, std::max(text.height + 2, top_left.y));
    cv::rectangle(canvas, {origin.x, origin.y - text.height - 2}, {origin.x + text.width + 2, origin.y + baseline - 1},
                  colour, cv::FILLED);
    cv::putText(canvas, label, {origin.x + 1, origin.y - 1}, cv::FONT_HERSHEY_SIMPLEX, scale, cv::Scalar(0, 0, 0), 1,
                cv::LINE_AA);
  }
  return canvas;
}

cv::Mat tile_grid(const std::vector<cv::Mat>& images, int cell_size) {
  const int count = static_cast<int>(images.size());
  const int columns = std::max(1, static_cast<int>(std::ceil(std::sqrt(count))));
  const int rows = (count + columns - 1) / columns;
  cv::Mat grid(rows * cell_size, columns * cell_size, CV_8UC3, cv::Scalar(255, 255, 255));
  for (int i = 0; i < count; ++i) {
    cv::Mat cell;
    cv::resize(images[i], cell, cv::Size(cell_size, cell_size), 0, 0, cv::INTER_AREA);
    cell.copyTo(grid(cv::Rect((i % columns) * cell_size, (i / columns) * cell_size, cell_size, cell_size)));
  }
  return grid;
}

}  // namespace libreyolo::data
