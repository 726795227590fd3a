#include "data/augment/geometry.h"

#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <cmath>
#include <numbers>

namespace libreyolo::data {

namespace {

const cv::Scalar kPad(kPadValue, kPadValue, kPadValue);

PixelBox scaled(const PixelBox& box, double sx, double sy, double dx = 0, double dy = 0) {
  return PixelBox{box.cls, static_cast<float>(box.x1 * sx + dx), static_cast<float>(box.y1 * sy + dy),
                  static_cast<float>(box.x2 * sx + dx), static_cast<float>(box.y2 * sy + dy)};
}

double degrees_to_radians(double degrees) { return degrees * std::numbers::pi / 180.0; }

// cv2.getRotationMatrix2D(center=(0,0), angle, scale) as a 3x3 matrix.
cv::Matx33d rotation(double angle_degrees, double scale) {
  const double a = degrees_to_radians(angle_degrees);
  const double alpha = scale * std::cos(a);
  const double beta = scale * std::sin(a);
  return {alpha, beta, 0, -beta, alpha, 0, 0, 0, 1};
}

// An axis-aligned M (no rotation, shear or perspective; the YOLOv9 family defaults) only moves
// and scales: resizing each piece's covered source region into its covered output region gives
// warpAffine's result (within the sub-pixel rounding of region edges) at a fraction of the cost,
// since warpAffine's per-pixel work does not drop for such matrices and the canvas need not be
// painted. Adjacent pieces round their shared edge the same way, so no seam appears.
bool resize_pieces_axis_aligned(const PiecedImage& image, const cv::Matx33d& m, cv::Size output, cv::Mat& target) {
  if (m(0, 1) != 0 || m(1, 0) != 0 || m(2, 0) != 0 || m(2, 1) != 0 || m(2, 2) != 1 || m(0, 0) <= 0 || m(1, 1) <= 0) {
    return false;
  }
  const double sx = m(0, 0), sy = m(1, 1), tx = m(0, 2), ty = m(1, 2);
  target = cv::Mat(output, CV_8UC3, kPad);
  for (const auto& piece : image.pieces) {
    const cv::Rect& r = piece.canvas_rect;
    const int x0 = std::clamp(static_cast<int>(std::lround(sx * r.x + tx)), 0, output.width);
    const int x1 = std::clamp(static_cast<int>(std::lround(sx * (r.x + r.width) + tx)), 0, output.width);
    const int y0 = std::clamp(static_cast<int>(std::lround(sy * r.y + ty)), 0, output.height);
    const int y1 = std::clamp(static_cast<int>(std::lround(sy * (r.y + r.height) + ty)), 0, output.height);
    if (x1 <= x0 || y1 <= y0) continue;
    const auto source_range = [](int out0, int out1, double scale, double shift, int origin, int size) {
      const int low = std::clamp(static_cast<int>(std::floor((out0 - shift) / scale)) - origin, 0, size - 1);
      const int high = std::clamp(static_cast<int>(std::ceil((out1 - shift) / scale)) - origin, low + 1, size);
      return std::pair{low, high};
    };
    const auto [u0, u1] = source_range(x0, x1, sx, tx, r.x, piece.pixels.cols);
    const auto [v0, v1] = source_range(y0, y1, sy, ty, r.y, piece.pixels.rows);
    cv::Mat region = target(cv::Rect(x0, y0, x1 - x0, y1 - y0));
    cv::resize(piece.pixels(cv::Rect(u0, v0, u1 - u0, v1 - v0)), region, region.size(), 0, 0, cv::INTER_LINEAR);
  }
  return true;
}

}  // namespace

Sample resize_long_side(const Sample& sample, int long_side) {
  const int height = sample.image.rows;
  const int width = sample.image.cols;
  const double ratio = static_cast<double>(long_side) / std::max(width, height);
  if (ratio == 1.0) return sample;
  const int new_width = std::min(static_cast<int>(std::ceil(width * ratio)), long_side);
  const int new_height = std::min(static_cast<int>(std::ceil(height * ratio)), long_side);
  Sample out;
  cv::resize(sample.image, out.image, cv::Size(new_width, new_height), 0, 0, cv::INTER_LINEAR);
  const double sx = static_cast<double>(new_width) / width;
  const double sy = static_cast<double>(new_height) / height;
  for (const auto& box : sample.boxes) out.boxes.push_back(scaled(box, sx, sy));
  return out;
}

LetterboxResult letterbox(const Sample& sample, cv::Size shape, bool scale_up) {
  const int height = sample.image.rows;
  const int width = sample.image.cols;
  double ratio = std::min(static_cast<double>(shape.height) / height, static_cast<double>(shape.width) / width);
  if (!scale_up) ratio = std::min(ratio, 1.0);
  const int new_width = static_cast<int>(std::round(width * ratio));
  const int new_height = static_cast<int>(std::round(height * ratio));
  const double dw = (shape.width - new_width) / 2.0;
  const double dh = (shape.height - new_height) / 2.0;
  cv::Mat resized = sample.image;
  if (new_width != width || new_height != height) {
    cv::resize(sample.image, resized, cv::Size(new_width, new_height), 0, 0, cv::INTER_LINEAR);
  }
  const int top = static_cast<int>(std::round(dh - 0.1));
  const int bottom = static_cast<int>(std::round(dh + 0.1));
  const int left = static_cast<int>(std::round(dw - 0.1));
  const int right = static_cast<int>(std::round(dw + 0.1));
  LetterboxResult result;
  cv::copyMakeBorder(resized, result.sample.image, top, bottom, left, right, cv::BORDER_CONSTANT, kPad);
  result.ratio = ratio;
  result.pad = {static_cast<double>(left), static_cast<double>(top)};
  const double sx = static_cast<double>(new_width) / width;
  const double sy = static_cast<double>(new_height) / height;
  for (const auto& box : sample.boxes) result.sample.boxes.push_back(scaled(box, sx, sy, left, top));
  return result;
}

LetterboxResult fit_top_left(const Sample& sample, cv::Size shape) {
  const double ratio = std::min(static_cast<double>(shape.height) / sample.image.rows,
                                static_cast<double>(shape.width) / sample.image.cols);
  const int new_width = static_cast<int>(sample.image.cols * ratio);
  const int new_height = static_cast<int>(sample.image.rows * ratio);
  LetterboxResult result;
  result.ratio = ratio;
  result.sample.image = cv::Mat(shape, CV_8UC3, kPad);
  cv::Mat resized;
  cv::resize(sample.image, resized, cv::Size(new_width, new_height), 0, 0, cv::INTER_LINEAR);
  resized.copyTo(result.sample.image(cv::Rect(0, 0, new_width, new_height)));
  for (const auto& box : sample.boxes) result.sample.boxes.push_back(scaled(box, ratio, ratio));
  return result;
}

Sample stretch_to(const Sample& sample, cv::Size shape, bool area_when_shrinking) {
  Sample out;
  if (sample.image.size() == shape) {
    out.image = sample.image.clone();
  } else {
    const bool shrinking = shape.width < sample.image.cols && shape.height < sample.image.rows;
    cv::resize(sample.image, out.image, shape, 0, 0, area_when_shrinking && shrinking ? cv::INTER_AREA : cv::INTER_LINEAR);
  }
  const double rx = static_cast<double>(shape.width) / sample.image.cols, ry = static_cast<double>(shape.height) / sample.image.rows;
  for (const auto& box : sample.boxes) out.boxes.push_back(scaled(box, rx, ry));
  return out;
}

std::vector<PixelBox> transform_boxes(const std::vector<PixelBox>& boxes, const cv::Matx33d& m, cv::Size bounds) {
  std::vector<PixelBox> out;
  out.reserve(boxes.size());
  for (const auto& box : boxes) {
    const double xs[4] = {box.x1, box.x2, box.x2, box.x1};
    const double ys[4] = {box.y1, box.y1, box.y2, box.y2};
    double x_min = 1e30, y_min = 1e30, x_max = -1e30, y_max = -1e30;
    for (int i = 0; i < 4; ++i) {
      const double w = m(2, 0) * xs[i] + m(2, 1) * ys[i] + m(2, 2);
      const double x = (m(0, 0) * xs[i] + m(0, 1) * ys[i] + m(0, 2)) / w;
      const double y = (m(1, 0) * xs[i] + m(1, 1) * ys[i] + m(1, 2)) / w;
      x_min = std::min(x_min, x);
      x_max = std::max(x_max, x);
      y_min = std::min(y_min, y);
      y_max = std::max(y_max, y);
    }
    const auto clip = [](double v, int hi) { return static_cast<float>(std::clamp(v, 0.0, static_cast<double>(hi))); };
    out.push_back({box.cls, clip(x_min, bounds.width), clip(y_min, bounds.height), clip(x_max, bounds.width),
                   clip(y_max, bounds.height)});
  }
  return out;
}

bool box_candidate(const PixelBox& before, const PixelBox& after, double area_threshold) {
  constexpr double kEps = 1e-16;
  const double w1 = before.width(), h1 = before.height();
  const double w2 = after.width(), h2 = after.height();
  const double aspect = std::max(w2 / (h2 + kEps), h2 / (w2 + kEps));
  return w2 > 2 && h2 > 2 && w2 * h2 / (w1 * h1 + kEps) > area_threshold && aspect < 100;
}

cv::Mat PiecedImage::paint() const {
  cv::Mat painted(canvas, CV_8UC3, kPad);
  for (const auto& piece : pieces) piece.pixels.copyTo(painted(piece.canvas_rect));
  return painted;
}

Sample random_perspective(const PiecedImage& image, const PerspectiveParams& p, cv::Size output, SampleRandom& random) {
  const cv::Matx33d center(1, 0, -image.canvas.width / 2.0, 0, 1, -image.canvas.height / 2.0, 0, 0, 1);
  cv::Matx33d perspective = cv::Matx33d::eye();
  perspective(2, 0) = random.uniform(-p.perspective, p.perspective);
  perspective(2, 1) = random.uniform(-p.perspective, p.perspective);
  const double angle = random.uniform(-p.degrees, p.degrees);
  const double scale = random.uniform(p.scale_low, p.scale_high);
  const cv::Matx33d rotate = rotation(angle, scale);
  cv::Matx33d shear = cv::Matx33d::eye();
  shear(0, 1) = std::tan(degrees_to_radians(random.uniform(-p.shear, p.shear)));
  shear(1, 0) = std::tan(degrees_to_radians(random.uniform(-p.shear, p.shear)));
  cv::Matx33d translate = cv::Matx33d::eye();
  translate(0, 2) = random.uniform(0.5 - p.translate, 0.5 + p.translate) * output.width;
  translate(1, 2) = random.uniform(0.5 - p.translate, 0.5 + p.translate) * output.height;
  const cv::Matx33d m = translate * shear * rotate * perspective * center;

  Sample out;
  if (!resize_pieces_axis_aligned(image, m, output, out.image)) {
    const cv::Mat painted = image.pieces.size() == 1 && image.pieces[0].canvas_rect == cv::Rect(cv::Point(), image.canvas)
                                ? image.pieces[0].pixels
                                : image.paint();
    if (p.perspective != 0) {
      cv::warpPerspective(painted, out.image, cv::Mat(m), output, cv::INTER_LINEAR, cv::BORDER_CONSTANT, kPad);
    } else {
      const cv::Matx23d affine(m(0, 0), m(0, 1), m(0, 2), m(1, 0), m(1, 1), m(1, 2));
      cv::warpAffine(painted, out.image, cv::Mat(affine), output, cv::INTER_LINEAR, cv::BORDER_CONSTANT, kPad);
    }
  }
  const auto moved = transform_boxes(image.boxes, m, output);
  for (std::size_t i = 0; i < moved.size(); ++i) {
    if (box_candidate(scaled(image.boxes[i], scale, scale), moved[i])) out.boxes.push_back(moved[i]);
  }
  return out;
}

Sample random_perspective(const Sample& sample, const PerspectiveParams& p, cv::Size output, SampleRandom& random) {
  const cv::Size size = sample.image.size();
  return random_perspective(PiecedImage{size, {{sample.image, cv::Rect(cv::Point(), size)}}, sample.boxes}, p, output,
                            random);
}

Sample random_affine(const Sample& sample, const PerspectiveParams& p, cv::Size output, SampleRandom& random) {
  const double angle = random.uniform(-p.degrees, p.degrees);
  const double scale = random.uniform(p.scale_low, p.scale_high);
  const cv::Matx33d r = rotation(angle, scale);
  const double shear_x = std::tan(degrees_to_radians(random.uniform(-p.shear, p.shear)));
  const double shear_y = std::tan(degrees_to_radians(random.uniform(-p.shear, p.shear)));
  cv::Matx33d m = cv::Matx33d::eye();
  for (int c = 0; c < 3; ++c) {
    m(0, c) = r(0, c) + shear_y * r(1, c);
    m(1, c) = r(1, c) + shear_x * r(0, c);
  }
  m(0, 2) = random.uniform(-p.translate, p.translate) * output.width;
  m(1, 2) = random.uniform(-p.translate, p.translate) * output.height;

  Sample out;
  const cv::Matx23d affine(m(0, 0), m(0, 1), m(0, 2), m(1, 0), m(1, 1), m(1, 2));
  cv::warpAffine(sample.image, out.image, cv::Mat(affine), output, cv::INTER_LINEAR, cv::BORDER_CONSTANT, kPad);
  out.boxes = transform_boxes(sample.boxes, m, output);
  return out;
}

void flip_horizontal_in_place(Sample& sample) {
  cv::flip(sample.image, sample.image, 1);
  const float width = static_cast<float>(sample.image.cols);
  for (auto& box : sample.boxes) box = {box.cls, width - box.x2, box.y1, width - box.x1, box.y2};
}

void flip_vertical_in_place(Sample& sample) {
  cv::flip(sample.image, sample.image, 0);
  const float height = static_cast<float>(sample.image.rows);
  for (auto& box : sample.boxes) box = {box.cls, box.x1, height - box.y2, box.x2, height - box.y1};
}

Sample flip_horizontal(const Sample& sample) {
  Sample out{sample.image.clone(), sample.boxes};  // the input may be shared with a cache
  flip_horizontal_in_place(out);
  return out;
}

Sample flip_vertical(const Sample& sample) {
  Sample out{sample.image.clone(), sample.boxes};
  flip_vertical_in_place(out);
  return out;
}

void drop_small_boxes(std::vector<PixelBox>& boxes, cv::Size bounds, float min_side) {
  std::erase_if(boxes, [&](PixelBox& box) {
    box.x1 = std::clamp(box.x1, 0.f, static_cast<float>(bounds.width));
    box.x2 = std::clamp(box.x2, 0.f, static_cast<float>(bounds.width));
    box.y1 = std::clamp(box.y1, 0.f, static_cast<float>(bounds.height));
    box.y2 = std::clamp(box.y2, 0.f, static_cast<float>(bounds.height));
    return !(std::min(box.width(), box.height()) > min_side);
  });
}

}  // namespace libreyolo::data
