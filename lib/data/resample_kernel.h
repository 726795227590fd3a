// The two passes of Pillow's fixed-point resampling (data/resample.h), compiled once per CPU
// capability (lib/meson.build), each copy in its own namespace; data/resample.cpp picks one as
// nn/cpu_kernels.h says. Integer arithmetic only, and no partial sum can overflow (Pillow's
// coefficients sum to 1 in 22-bit fixed point), so every copy and every order of summation gives
// the same pixels.
#pragma once

#include <cstddef>
#include <cstdint>

namespace libreyolo::data::kernels {

inline constexpr int kResamplePrecisionBits = 32 - 8 - 2;

// One axis's coefficients: output pixel i reads `count[i]` input pixels from `first[i]` with the
// weights `weights[i * ksize ...]` (fixed point, kResamplePrecisionBits).
struct ResampleAxis {
  int out_size = 0;
  int ksize = 0;
  const int* first = nullptr;
  const int* count = nullptr;
  const std::int32_t* weights = nullptr;
};

// `rows` rows of `channels`-interleaved 8-bit pixels at `src` (row stride in bytes), resampled
// along x into `dst` (axis.out_size pixels per row).
using ResampleHorizontalFn = void (*)(const std::uint8_t* src, std::size_t src_stride, int rows, int channels,
                                      std::uint8_t* dst, std::size_t dst_stride, const ResampleAxis& axis);
// Resampled along y: output row i reads source rows axis.first[i] - shift onwards; `row_bytes`
// bytes per row.
using ResampleVerticalFn = void (*)(const std::uint8_t* src, std::size_t src_stride, int row_bytes, std::uint8_t* dst,
                                    std::size_t dst_stride, const ResampleAxis& axis, int shift);

struct ResampleKernels {
  ResampleHorizontalFn horizontal;
  ResampleVerticalFn vertical;
};

namespace DEFAULT { ResampleKernels resample_kernels(); }
namespace AVX2 { ResampleKernels resample_kernels(); }
namespace AVX512 { ResampleKernels resample_kernels(); }

}  // namespace libreyolo::data::kernels
