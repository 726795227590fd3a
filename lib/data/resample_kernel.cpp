// Compiled three times (lib/meson.build): -DCPU_CAPABILITY=DEFAULT, AVX2 and AVX512, each copy in
// namespace kernels::CPU_CAPABILITY. The loops are written for the compiler to vectorise with the
// copy's instruction set: the vertical pass along a row, the horizontal pass across 8 rows at once
// (the rows' bytes transposed so that one source pixel's channel of 8 rows is 8 adjacent bytes).
#ifndef CPU_CAPABILITY
#error "compile with -DCPU_CAPABILITY=DEFAULT|AVX2|AVX512"
#endif

#include "data/resample_kernel.h"

#include <algorithm>
#include <cstring>
#include <vector>

#if defined(__AVX2__)
#include <immintrin.h>
#elif defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace libreyolo::data::kernels::CPU_CAPABILITY {

namespace {

constexpr int kBits = kResamplePrecisionBits;
constexpr std::int32_t kHalf = 1 << (kBits - 1);
constexpr int kRows = 8;  // rows per horizontal block: one 8x8 byte transpose

// Pillow's clip8: (in >> 22) clamped to 0..255 (in >= 2^30 gives >= 256, in <= 0 gives <= 0).
inline std::uint8_t clip8(std::int32_t in) { return static_cast<std::uint8_t>(std::clamp(in >> kBits, 0, 255)); }

// 8 rows' int32 sums (GCC's vector extensions: one AVX2 register, two SSE2 ones). Passed only
// between functions of this file's anonymous namespace, so the ABI GCC warns about is never crossed.
#pragma GCC diagnostic ignored "-Wpsabi"
using Lanes = std::int32_t __attribute__((vector_size(kRows * sizeof(std::int32_t))));
using Bytes = std::uint8_t __attribute__((vector_size(kRows)));

// 8 bytes at p as 8 lanes (GCC 12 turns __builtin_convertvector into one insert per lane; the
// intrinsics are one instruction with AVX2, three with SSE2).
inline Lanes widen(const std::uint8_t* p) {
  Lanes v;
#if defined(__AVX2__)
  const __m256i w = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  std::memcpy(&v, &w, sizeof v);
#elif defined(__SSE2__)
  const __m128i zero = _mm_setzero_si128();
  const __m128i w = _mm_unpacklo_epi8(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)), zero);
  const __m128i halves[2] = {_mm_unpacklo_epi16(w, zero), _mm_unpackhi_epi16(w, zero)};
  std::memcpy(&v, halves, sizeof v);
#else
  Bytes b;
  std::memcpy(&b, p, sizeof b);
  v = __builtin_convertvector(b, Lanes);
#endif
  return v;
}

// clip8 of each lane into 8 bytes at q
inline void narrow(Lanes v, std::uint8_t* q) {
  v >>= kBits;
  v = v < 0 ? Lanes{} : v;
  v = v > 255 ? Lanes{} + 255 : v;
#if defined(__SSE2__)
  __m128i halves[2];
  std::memcpy(halves, &v, sizeof v);
  const __m128i w = _mm_packs_epi32(halves[0], halves[1]);  // 0..255: no saturation
  _mm_storel_epi64(reinterpret_cast<__m128i*>(q), _mm_packus_epi16(w, w));
#else
  const Bytes b = __builtin_convertvector(v, Bytes);
  std::memcpy(q, &b, sizeof b);
#endif
}

// out[j * out_stride + r] = rows[r][j] for r, j < 8.
inline void transpose8x8(const std::uint8_t* const rows[kRows], std::uint8_t* out, std::size_t out_stride) {
#if defined(__SSE2__)
  const auto load = [&](int r) { return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(rows[r])); };
  const __m128i a0 = _mm_unpacklo_epi8(load(0), load(1));  // 00 10 01 11 ... 07 17
  const __m128i a1 = _mm_unpacklo_epi8(load(2), load(3));
  const __m128i a2 = _mm_unpacklo_epi8(load(4), load(5));
  const __m128i a3 = _mm_unpacklo_epi8(load(6), load(7));
  const __m128i b0 = _mm_unpacklo_epi16(a0, a1);  // 00 10 20 30 01 11 21 31 ... 03 13 23 33
  const __m128i b1 = _mm_unpackhi_epi16(a0, a1);  // columns 4..7 of rows 0..3
  const __m128i b2 = _mm_unpacklo_epi16(a2, a3);  // columns 0..3 of rows 4..7
  const __m128i b3 = _mm_unpackhi_epi16(a2, a3);
  const __m128i c[4] = {_mm_unpacklo_epi32(b0, b2), _mm_unpackhi_epi32(b0, b2), _mm_unpacklo_epi32(b1, b3),
                        _mm_unpackhi_epi32(b1, b3)};  // columns (0, 1), (2, 3), (4, 5), (6, 7) of rows 0..7
  for (int j = 0; j < 4; ++j) {
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out + (2 * j) * out_stride), c[j]);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out + (2 * j + 1) * out_stride), _mm_unpackhi_epi64(c[j], c[j]));
  }
#else
  for (int j = 0; j < 8; ++j) {
    for (int r = 0; r < kRows; ++r) out[static_cast<std::size_t>(j) * out_stride + static_cast<std::size_t>(r)] = rows[r][j];
  }
#endif
}

template <int C>
void horizontal_block(const std::uint8_t* const rows[kRows], int span, int lo, std::uint8_t* const out_rows[kRows], int valid_rows,
                      const ResampleAxis& axis, std::vector<std::uint8_t>& in_t, std::vector<std::uint8_t>& out_t) {
  // in_t[j * 8 + r] = rows[r][j] for the span's bytes
  int j = 0;
  for (; j + 8 <= span; j += 8) {
    const std::uint8_t* at[kRows];
    for (int r = 0; r < kRows; ++r) at[r] = rows[r] + j;
    transpose8x8(at, in_t.data() + static_cast<std::size_t>(j) * kRows, kRows);
  }
  for (; j < span; ++j) {
    for (int r = 0; r < kRows; ++r) in_t[static_cast<std::size_t>(j) * kRows + static_cast<std::size_t>(r)] = rows[r][j];
  }
  for (int xx = 0; xx < axis.out_size; ++xx) {
    Lanes acc[C];
    for (int c = 0; c < C; ++c) acc[c] = Lanes{} + kHalf;
    const std::int32_t* k = axis.weights + static_cast<std::size_t>(xx) * static_cast<std::size_t>(axis.ksize);
    const std::uint8_t* p = in_t.data() + static_cast<std::size_t>(axis.first[xx] - lo) * C * kRows;
    for (int x = 0; x < axis.count[xx]; ++x, p += C * kRows) {
      const std::int32_t w = k[x];
      for (int c = 0; c < C; ++c) acc[c] += widen(p + c * kRows) * w;
    }
    std::uint8_t* q = out_t.data() + static_cast<std::size_t>(xx) * C * kRows;
    for (int c = 0; c < C; ++c) narrow(acc[c], q + c * kRows);
  }
  // back: out_rows[r][j] = out_t[j * 8 + r]
  const int out_bytes = axis.out_size * C;
  std::uint8_t tile[kRows * 8];
  for (j = 0; j < out_bytes; j += 8) {
    const std::uint8_t* at[kRows];
    for (int i = 0; i < kRows; ++i) at[i] = out_t.data() + static_cast<std::size_t>(j + i) * kRows;
    transpose8x8(at, tile, 8);  // tile[r * 8 + i] = out_t[(j + i) * 8 + r]
    const int n = std::min(8, out_bytes - j);
    for (int r = 0; r < valid_rows; ++r) std::memcpy(out_rows[r] + j, tile + r * 8, static_cast<std::size_t>(n));
  }
}

template <int C>
void horizontal_channels(const std::uint8_t* src, std::size_t src_stride, int rows, std::uint8_t* dst, std::size_t dst_stride,
                         const ResampleAxis& axis) {
  if (axis.out_size < 1 || rows < 1) return;
  int lo = axis.first[0], hi = lo;
  for (int i = 0; i < axis.out_size; ++i) {
    lo = std::min(lo, axis.first[i]);
    hi = std::max(hi, axis.first[i] + axis.count[i]);
  }
  const int span = (hi - lo) * C;
  // the transposed input, 8 bytes per source byte (rounded up to whole 8-byte groups), and output
  std::vector<std::uint8_t> in_t(static_cast<std::size_t>((span + 7) / 8 * 8) * kRows);
  std::vector<std::uint8_t> out_t(static_cast<std::size_t>((axis.out_size * C + 7) / 8 * 8) * kRows);
  for (int y0 = 0; y0 < rows; y0 += kRows) {
    const int valid = std::min(kRows, rows - y0);
    const std::uint8_t* in_rows[kRows];
    std::uint8_t* out_rows[kRows];
    for (int r = 0; r < kRows; ++r) {
      const int y = y0 + std::min(r, valid - 1);  // a short last block repeats its last row; those outputs are dropped
      in_rows[r] = src + static_cast<std::size_t>(y) * src_stride + static_cast<std::size_t>(lo) * C;
      out_rows[r] = dst + static_cast<std::size_t>(y) * dst_stride;
    }
    horizontal_block<C>(in_rows, span, lo, out_rows, valid, axis, in_t, out_t);
  }
}

void horizontal(const std::uint8_t* src, std::size_t src_stride, int rows, int channels, std::uint8_t* dst, std::size_t dst_stride,
                const ResampleAxis& axis) {
  switch (channels) {
    case 1: return horizontal_channels<1>(src, src_stride, rows, dst, dst_stride, axis);
    case 2: return horizontal_channels<2>(src, src_stride, rows, dst, dst_stride, axis);
    case 3: return horizontal_channels<3>(src, src_stride, rows, dst, dst_stride, axis);
    default: return horizontal_channels<4>(src, src_stride, rows, dst, dst_stride, axis);
  }
}

// One output row's bytes [x, x + N) (N a compile-time width the compiler vectorises).
template <int N>
inline void vertical_chunk(const std::uint8_t* src, std::size_t src_stride, int x, const std::int32_t* k, int taps, std::uint8_t* dst) {
  std::int32_t acc[N];
  for (int i = 0; i < N; ++i) acc[i] = kHalf;
  const std::uint8_t* s = src + x;
  for (int y = 0; y < taps; ++y, s += src_stride) {
    const std::int32_t w = k[y];
    for (int i = 0; i < N; ++i) acc[i] += static_cast<std::int32_t>(s[i]) * w;
  }
  for (int i = 0; i < N; ++i) dst[x + i] = clip8(acc[i]);
}

void vertical(const std::uint8_t* src, std::size_t src_stride, int row_bytes, std::uint8_t* dst, std::size_t dst_stride,
              const ResampleAxis& axis, int shift) {
  constexpr int kChunk = 64;
  for (int yy = 0; yy < axis.out_size; ++yy) {
    const std::uint8_t* first = src + static_cast<std::size_t>(axis.first[yy] - shift) * src_stride;
    const std::int32_t* k = axis.weights + static_cast<std::size_t>(yy) * static_cast<std::size_t>(axis.ksize);
    std::uint8_t* out = dst + static_cast<std::size_t>(yy) * dst_stride;
    int x = 0;
    for (; x + kChunk <= row_bytes; x += kChunk) vertical_chunk<kChunk>(first, src_stride, x, k, axis.count[yy], out);
    for (; x + 8 <= row_bytes; x += 8) vertical_chunk<8>(first, src_stride, x, k, axis.count[yy], out);
    for (; x < row_bytes; ++x) {
      std::int32_t acc = kHalf;
      const std::uint8_t* s = first + x;
      for (int y = 0; y < axis.count[yy]; ++y, s += src_stride) acc += static_cast<std::int32_t>(*s) * k[y];
      out[x] = clip8(acc);
    }
  }
}

}  // namespace

ResampleKernels resample_kernels() { return {horizontal, vertical}; }

}  // namespace libreyolo::data::kernels::CPU_CAPABILITY
