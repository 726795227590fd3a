// Pillow's libImaging/Resample.c algorithm, in our code: the coefficients per output pixel
// (precompute_coeffs), their 22-bit fixed-point form (normalize_coeffs_8bpc) and the two passes.
#include "data/resample.h"

#include "data/resample_kernel.h"
#include "nn/cpu_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

namespace libreyolo::data {

namespace {

constexpr int kPrecisionBits = kernels::kResamplePrecisionBits;

double bicubic(double x) {
  constexpr double a = -0.5;
  if (x < 0.0) x = -x;
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

double bilinear(double x) {
  if (x < 0.0) x = -x;
  if (x < 1.0) return 1.0 - x;
  return 0.0;
}

// One axis: for each output pixel its first input pixel, how many it reads and their weights.
struct Coefficients {
  int ksize = 0;
  std::vector<int> first, count;
  std::vector<std::int32_t> weights;  // [out, ksize], fixed point
};

Coefficients coefficients(int in_size, double in0, double in1, int out_size, ResampleFilter kind) {
  const double support_base = kind == ResampleFilter::bicubic ? 2.0 : 1.0;
  const auto filter = kind == ResampleFilter::bicubic ? bicubic : bilinear;
  const double scale = (in1 - in0) / out_size;
  const double filterscale = std::max(scale, 1.0);
  const double support = support_base * filterscale;
  Coefficients c;
  c.ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  c.first.resize(static_cast<std::size_t>(out_size));
  c.count.resize(static_cast<std::size_t>(out_size));
  c.weights.assign(static_cast<std::size_t>(out_size) * static_cast<std::size_t>(c.ksize), 0);
  std::vector<double> k(static_cast<std::size_t>(c.ksize));
  for (int xx = 0; xx < out_size; ++xx) {
    const double center = in0 + (xx + 0.5) * scale;
    const double ss = 1.0 / filterscale;
    int xmin = static_cast<int>(center - support + 0.5);  // C's truncation, as Pillow
    if (xmin < 0) xmin = 0;
    int xmax = static_cast<int>(center + support + 0.5);
    if (xmax > in_size) xmax = in_size;
    xmax -= xmin;
    double ww = 0.0;
    for (int x = 0; x < xmax; ++x) {
      const double w = filter((x + xmin - center + 0.5) * ss);
      k[static_cast<std::size_t>(x)] = w;
      ww += w;
    }
    for (int x = 0; x < xmax; ++x) {
      if (ww != 0.0) k[static_cast<std::size_t>(x)] /= ww;
    }
    std::int32_t* out = &c.weights[static_cast<std::size_t>(xx) * static_cast<std::size_t>(c.ksize)];
    for (int x = 0; x < xmax; ++x) {
      const double v = k[static_cast<std::size_t>(x)] * (1 << kPrecisionBits);
      out[x] = static_cast<std::int32_t>(v < 0 ? -0.5 + v : 0.5 + v);
    }
    c.first[static_cast<std::size_t>(xx)] = xmin;
    c.count[static_cast<std::size_t>(xx)] = xmax;
  }
  return c;
}

const kernels::ResampleKernels& kernels_here() {
  static const kernels::ResampleKernels chosen = [] {
    switch (nn::cpu_kernels()) {
#if defined(__x86_64__)
      case nn::CpuKernels::Avx512: return kernels::AVX512::resample_kernels();
      case nn::CpuKernels::Avx2: return kernels::AVX2::resample_kernels();
#endif
      default: return kernels::DEFAULT::resample_kernels();
    }
  }();
  return chosen;
}

kernels::ResampleAxis axis(const Coefficients& c) {
  return {.out_size = static_cast<int>(c.first.size()), .ksize = c.ksize, .first = c.first.data(), .count = c.count.data(),
          .weights = c.weights.data()};
}

// Rows [row0, row0 + out.rows) of `in`, resampled along x into `out`.
void horizontal(const cv::Mat& in, cv::Mat& out, int row0, const Coefficients& c) {
  kernels_here().horizontal(in.ptr<std::uint8_t>(row0), in.step, out.rows, in.channels(), out.ptr<std::uint8_t>(0), out.step, axis(c));
}

// `in` resampled along y into `out`; `first` already relative to `in`'s first row.
void vertical(const cv::Mat& in, cv::Mat& out, const Coefficients& c, int shift) {
  kernels_here().vertical(in.ptr<std::uint8_t>(0), in.step, out.cols * out.channels(), out.ptr<std::uint8_t>(0), out.step, axis(c), shift);
}

}  // namespace

cv::Mat pillow_resize(const cv::Mat& source, cv::Size size, ResampleFilter filter, cv::Rect2d box) {
  if (source.depth() != CV_8U || source.channels() < 1 || source.channels() > 4) {
    throw std::invalid_argument("pillow_resize: an 8-bit image of 1 to 4 channels");
  }
  if (size.width < 1 || size.height < 1) throw std::invalid_argument("pillow_resize: an empty output size");
  const double x0 = box.x, y0 = box.y, x1 = box.x + box.width, y1 = box.y + box.height;
  const bool need_horizontal = size.width != source.cols || x0 != 0 || x1 != size.width;
  const bool need_vertical = size.height != source.rows || y0 != 0 || y1 != size.height;
  const Coefficients cx = coefficients(source.cols, x0, x1, size.width, filter);
  const Coefficients cy = coefficients(source.rows, y0, y1, size.height, filter);
  // Pillow 13 (the test venv's): where the height shrinks more than twice as much as the width,
  // the vertical pass runs first (fewer rows for the horizontal one); the rounding differs
  const int shrink_y = source.rows - size.height, shrink_x = source.cols - size.width;
  const bool horizontal_first = !(shrink_y > 0 && shrink_y > shrink_x * 2);
  if (!need_horizontal && !need_vertical) return source.clone();
  if (horizontal_first) {
    // the source rows the vertical pass reads
    const int first_row = cy.first.front();
    const int last_row = cy.first.back() + cy.count.back();
    cv::Mat middle = source;
    int shift = 0;
    if (need_horizontal) {
      middle.create(last_row - first_row, size.width, source.type());
      horizontal(source, middle, first_row, cx);
      shift = first_row;
    }
    if (!need_vertical) return middle;
    cv::Mat out(size, source.type());
    vertical(middle, out, cy, shift);
    return out;
  }
  cv::Mat middle = source;
  if (need_vertical) {
    middle.create(size.height, source.cols, source.type());
    vertical(source, middle, cy, 0);
  }
  if (!need_horizontal) return middle;
  cv::Mat out(size, source.type());
  horizontal(middle, out, 0, cx);
  return out;
}

cv::Mat pillow_resize(const cv::Mat& source, cv::Size size, ResampleFilter filter) {
  return pillow_resize(source, size, filter, cv::Rect2d(0, 0, source.cols, source.rows));
}

}  // namespace libreyolo::data
