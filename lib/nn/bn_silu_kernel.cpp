// Compiled three times (lib/meson.build): -DCPU_CAPABILITY=DEFAULT, AVX2 (with -mavx2 -mfma) and
// AVX512 (-mavx512f -mavx512bw -mavx512vl -mavx512dq -mfma). ATen's vector headers put each copy
// in namespace at::vec::CPU_CAPABILITY, and this file puts its own in kernels::CPU_CAPABILITY, so
// the three never share a symbol.
#ifndef CPU_CAPABILITY
#error "compile with -DCPU_CAPABILITY=DEFAULT|AVX2|AVX512"
#endif

#include "nn/bn_silu_kernel.h"

#include <ATen/Parallel.h>
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

namespace libreyolo::nn::kernels::CPU_CAPABILITY {

namespace {

using Vec = at::vec::Vectorized<float>;
constexpr std::int64_t kLanes = Vec::size();

inline Vec load(const float* p) { return Vec::loadu(p); }
inline Vec load(const c10::BFloat16* p) {
  Vec out;
  at::vec::load_fp32_from_bf16(p, out);
  return out;
}
// Two vectors' worth: a bfloat16 store is only whole at that width (a narrower one goes through memcpy).
inline void load2(const float* p, Vec& a, Vec& b) {
  a = Vec::loadu(p);
  b = Vec::loadu(p + kLanes);
}
inline void load2(const c10::BFloat16* p, Vec& a, Vec& b) { at::vec::load_fp32_from_bf16(p, a, b); }
inline void store2(float* p, const Vec& a, const Vec& b) {
  a.store(p);
  b.store(p + kLanes);
}
inline void store2(c10::BFloat16* p, const Vec& a, const Vec& b) { at::vec::convert_from_float<c10::BFloat16>(a, b).store(p); }
inline void store1(float* p, const Vec& v) { v.store(p); }
inline void store1(c10::BFloat16* p, const Vec& v) {
  // convert_from_float(a, b) holds a's values in its low half: store that half whole
  const auto both = at::vec::convert_from_float<c10::BFloat16>(v, v);
#if defined(CPU_CAPABILITY_AVX512)
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_castsi512_si256(static_cast<__m512i>(both)));
#elif defined(CPU_CAPABILITY_AVX2)
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(static_cast<__m256i>(both)));
#else
  both.store(p, kLanes);
#endif
}

// sigmoid(y) < FLT_MIN for y below this: 0 there, never a denormal (std::exp overflows to inf and
// gives 0 by itself; exp_u20 saturates at FLT_MAX, and 1 / (1 + FLT_MAX) is a denormal, which
// would slow every later operation that touches it, the convolutions' included).
constexpr float kSigmoidZeroBelow = -87.0f;
inline float sigmoid(float y) { return y < kSigmoidZeroBelow ? 0.0f : 1.0f / (1.0f + std::exp(-y)); }
inline Vec sigmoid(const Vec& y) {
  const Vec one(1.0f);
  return Vec::blendv(one / (one + y.neg().exp_u20()), Vec(0.0f), y < Vec(kSigmoidZeroBelow));
}

// Rows per task: about 32k elements, as ATen's GRAIN_SIZE.
std::int64_t grain(BnSiluShape shape) { return std::max<std::int64_t>(1, 32768 / std::max<std::int64_t>(1, shape.channels)); }

// Column reductions over rows: `Sums` accumulators per channel. The rows go in tiles of about
// kTileElements values, small enough to stay in L1 while every block of channels passes over them;
// the channels go in blocks of up to kBlock vectors whose accumulators stay in registers while the
// tile's rows stream past (a row-major accumulate would store and reload them at every row), then
// go back to the thread's float sums. Over whole rows instead of tiles, each block would stream all
// the rows again: with 64 float channels on AVX2 (two blocks) the backward read and wrote its
// memory twice and ran 2x slower than ATen's. The channels past the last whole vector go one at a
// time. Each thread adds into its own float sums (in row order, as one pass would) and moves them
// to its double totals every kFlushRows rows; then the threads' totals are summed. (Float sums
// over all of a large layer's rows were less accurate than ATen's BatchNorm: YOLOv9-t's train-mode
// maps came out 2x further from float64 than with ATen's channels-last ops,
// test/parity/model_parity_test.cpp; a double add per tile cost 8% at 64 channels.)
constexpr int kBlock = 4;
constexpr std::int64_t kTileElements = 2048;
constexpr std::int64_t kFlushRows = 256;

// `prepare(tile)` runs before each tile's column blocks, and `element(tile, r, c, terms)` gives the
// terms of row r at channel c (a vector's worth, or one): the backward computes the tile's dy in
// prepare, row-major, so that its heavy elementwise work streams, and only sums it per column.
struct Tile {
  int thread;
  std::int64_t begin, end;
};
struct NoPrepare {
  void operator()(const Tile&) const {}
};
std::int64_t tile_rows(std::int64_t channels) { return std::max<std::int64_t>(1, kTileElements / channels); }

template <int Sums, typename Element, typename Prepare = NoPrepare>
std::vector<double> reduce_columns(BnSiluShape shape, const Element& element, const Prepare& prepare = {}) {
  const std::int64_t C = shape.channels;
  const std::int64_t vec_end = C - C % kLanes;
  const std::int64_t tile = tile_rows(C);
  const int threads = at::get_num_threads();
  const std::int64_t width = Sums * C;
  std::vector<float> partial(static_cast<std::size_t>(threads) * width, 0.0f);
  std::vector<double> totals(static_cast<std::size_t>(threads) * width, 0.0);
  at::parallel_for(0, shape.rows, grain(shape), [&](std::int64_t begin, std::int64_t end) {
    const int thread = at::get_thread_num();
    float* out = partial.data() + static_cast<std::size_t>(thread) * width;
    double* total = totals.data() + static_cast<std::size_t>(thread) * width;
    std::int64_t unflushed = 0;
    const auto flush = [&] {
      for (std::int64_t i = 0; i < width; ++i) {
        total[i] += out[i];
        out[i] = 0.0f;
      }
      unflushed = 0;
    };
    for (std::int64_t tile_begin = begin; tile_begin < end; tile_begin += tile) {
      const Tile current{thread, tile_begin, std::min(end, tile_begin + tile)};
      prepare(current);
      for (std::int64_t c0 = 0; c0 < vec_end; c0 += kBlock * kLanes) {
        const int vectors = static_cast<int>(std::min<std::int64_t>(kBlock, (vec_end - c0) / kLanes));
        Vec acc[Sums][kBlock];
        for (int s = 0; s < Sums; ++s) {
          for (int v = 0; v < vectors; ++v) acc[s][v] = load(out + s * C + c0 + v * kLanes);
        }
        for (std::int64_t r = current.begin; r < current.end; ++r) {
          for (int v = 0; v < vectors; ++v) {
            const std::int64_t c = c0 + v * kLanes;
            Vec terms[Sums];
            element(current, r, c, terms);
            for (int s = 0; s < Sums; ++s) acc[s][v] = acc[s][v] + terms[s];
          }
        }
        for (int s = 0; s < Sums; ++s) {
          for (int v = 0; v < vectors; ++v) acc[s][v].store(out + s * C + c0 + v * kLanes);
        }
      }
      for (std::int64_t c = vec_end; c < C; ++c) {
        for (std::int64_t r = current.begin; r < current.end; ++r) {
          float terms[Sums];
          element(current, r, c, terms);
          for (int s = 0; s < Sums; ++s) out[s * C + c] += terms[s];
        }
      }
      unflushed += current.end - current.begin;
      if (unflushed >= kFlushRows) flush();
    }
    flush();
  });
  std::vector<double> sums(width, 0.0);
  for (int t = 0; t < threads; ++t) {
    for (std::int64_t i = 0; i < width; ++i) sums[i] += totals[t * width + i];
  }
  return sums;
}

// A span of n contiguous values (a row's channels, or a plane): pair(i) on pairs of vectors, one(i)
// on a vector, then scalar(i) on single values.
template <typename Pair, typename One, typename Scalar>
void over_span(std::int64_t n, const Pair& pair, const One& one, const Scalar& scalar) {
  std::int64_t i = 0;
  for (; i + 2 * kLanes <= n; i += 2 * kLanes) pair(i);
  for (; i + kLanes <= n; i += kLanes) one(i);
  for (; i < n; ++i) scalar(i);
}

// Runs body(i, c) over every row, i = r * channels + c, split as over_span does.
template <typename T, typename Pair, typename One, typename Scalar>
void map_rows(BnSiluShape shape, const Pair& pair, const One& one, const Scalar& scalar) {
  const std::int64_t C = shape.channels;
  at::parallel_for(0, shape.rows, grain(shape), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      over_span(
          C, [&](std::int64_t c) { pair(r * C + c, c); }, [&](std::int64_t c) { one(r * C + c, c); },
          [&](std::int64_t c) { scalar(r * C + c, c); });
    }
  });
}

// Mean and biased variance from Σd and Σd² over `count` values, d = x - origin (the statistics'
// one pass shifts by a sampled mean of the channel, so that E[d²] - E[d]² does not cancel).
inline void shifted_moments(float origin, double sum, double sum_squares, double count, float& mean, float& variance) {
  const double shift_mean = sum / count;
  mean = static_cast<float>(origin + shift_mean);
  variance = static_cast<float>(std::max(0.0, sum_squares / count - shift_mean * shift_mean));
}

// The statistics' shift: the mean of up to kOriginSamples of a channel's `count` values, spread
// evenly over them (value(i) gives the i-th). One pass of Σd and Σd², d = x - origin, cancels in
// E[d²] - E[d]² by about (mean - origin)² / variance float roundings: a shift by the first value
// alone lost 1.2e-4 of the variance where that value was a corner pixel 400 standard deviations
// out (zero padding, a flat synthetic background); the sample's mean: 3.8e-7. A sample's mean lies
// within a fraction of a standard deviation of the mean wherever rare values are what is far out.
constexpr std::int64_t kOriginSamples = 64;
template <typename Value>
float sampled_origin(std::int64_t count, const Value& value) {
  const std::int64_t samples = std::min(count, kOriginSamples);
  double sum = 0.0;
  for (std::int64_t i = 0; i < samples; ++i) sum += value(samples == 1 ? 0 : i * (count - 1) / (samples - 1));
  return static_cast<float>(sum / static_cast<double>(samples));
}

template <typename T>
void stats(const T* x, BnSiluShape shape, float* mean, float* variance) {
  const std::int64_t C = shape.channels;
  // One pass: Σ(x - x₀) and Σ(x - x₀)², x₀ a sampled mean (sampled_origin), so that E[d²] - E[d]²
  // does not cancel.
  std::vector<float> origin(C);
  for (std::int64_t c = 0; c < C; ++c) {
    origin[c] = sampled_origin(shape.rows, [&](std::int64_t r) { return static_cast<double>(x[r * C + c]); });
  }
  const float* o = origin.data();
  const auto sums = reduce_columns<2>(shape, [&](const Tile&, std::int64_t r, std::int64_t c, auto* terms) {
    if constexpr (std::is_same_v<std::remove_pointer_t<decltype(terms)>, Vec>) {
      const Vec d = load(x + r * C + c) - load(o + c);
      terms[0] = d;
      terms[1] = d * d;
    } else {
      const float d = static_cast<float>(x[r * C + c]) - o[c];
      terms[0] = d;
      terms[1] = d * d;
    }
  });
  const double rows = static_cast<double>(shape.rows);
  for (std::int64_t c = 0; c < C; ++c) shifted_moments(o[c], sums[c], sums[C + c], rows, mean[c], variance[c]);
}

// dy = dz * silu'(y), silu'(y) = s (1 + y (1 - s)), s = sigmoid(y)
inline Vec silu_grad(const Vec& dz, const Vec& y) {
  const Vec s = sigmoid(y);
  const Vec one(1.0f);
  return dz * s * (one + y * (one - s));
}
inline float silu_grad(float dz, float y) {
  const float s = sigmoid(y);
  return dz * s * (1.0f + y * (1.0f - s));
}

// The activation after the BatchNorm: its value at y and dz times its derivative there.
struct Silu {
  static Vec value(const Vec& y) { return y * sigmoid(y); }
  static float value(float y) { return y * sigmoid(y); }
  static Vec grad(const Vec& dz, const Vec& y) { return silu_grad(dz, y); }
  static float grad(float dz, float y) { return silu_grad(dz, y); }
};
// ATen's relu (clamp_min(y, 0)) and threshold_backward (dz where the output is above 0, else 0).
struct Relu {
  static Vec value(const Vec& y) { return at::vec::clamp_min(y, Vec(0.0f)); }
  static float value(float y) { return y > 0.0f ? y : 0.0f; }
  static Vec grad(const Vec& dz, const Vec& y) { return Vec::blendv(Vec(0.0f), dz, y > Vec(0.0f)); }
  static float grad(float dz, float y) { return y > 0.0f ? dz : 0.0f; }
};

template <typename T, typename Act>
void apply(const T* x, T* z, BnSiluShape shape, const float* scale, const float* shift) {
  auto act_of = [&](const Vec& in, std::int64_t c) { return Act::value(at::vec::fmadd(in, load(scale + c), load(shift + c))); };
  map_rows<T>(
      shape,
      [&](std::int64_t i, std::int64_t c) {
        Vec a, b;
        load2(x + i, a, b);
        store2(z + i, act_of(a, c), act_of(b, c + kLanes));
      },
      [&](std::int64_t i, std::int64_t c) { store1(z + i, act_of(load(x + i), c)); },
      [&](std::int64_t i, std::int64_t c) { z[i] = static_cast<T>(Act::value(static_cast<float>(x[i]) * scale[c] + shift[c])); });
}

template <typename T, typename Act>
void reduce(const T* x, const T* dz, std::int64_t dz_row_stride, T* dy_out, BnSiluShape shape, const float* scale,
            const float* shift, const float* mean, const float* invstd, float* sum_dy, float* sum_dy_xhat) {
  const std::int64_t C = shape.channels;
  constexpr bool kFloat = std::is_same_v<T, float>;
  // The unrounded dy of each thread's current tile: dy_out itself for float, a float copy for bfloat16.
  const std::int64_t tile_size = tile_rows(C) * C;
  std::vector<float> scratch(kFloat ? 0 : static_cast<std::size_t>(at::get_num_threads()) * tile_size);
  const auto tile_dy = [&](const Tile& tile, std::int64_t r) -> float* {
    if constexpr (kFloat) {
      return dy_out + r * C;
    } else {
      return scratch.data() + tile.thread * tile_size + (r - tile.begin) * C;
    }
  };
  const auto prepare = [&](const Tile& tile) {
    for (std::int64_t r = tile.begin; r < tile.end; ++r) {
      const T *xr = x + r * C, *dzr = dz + r * dz_row_stride;
      T* out = dy_out + r * C;
      float* unrounded = tile_dy(tile, r);
      over_span(
          C,
          [&](std::int64_t c) {
            Vec xa, xb, da, db;
            load2(xr + c, xa, xb);
            load2(dzr + c, da, db);
            const Vec dya = Act::grad(da, at::vec::fmadd(xa, load(scale + c), load(shift + c)));
            const Vec dyb = Act::grad(db, at::vec::fmadd(xb, load(scale + c + kLanes), load(shift + c + kLanes)));
            store2(out + c, dya, dyb);
            if constexpr (!kFloat) {
              dya.store(unrounded + c);
              dyb.store(unrounded + c + kLanes);
            }
          },
          [&](std::int64_t c) {
            const Vec dy = Act::grad(load(dzr + c), at::vec::fmadd(load(xr + c), load(scale + c), load(shift + c)));
            store1(out + c, dy);
            if constexpr (!kFloat) dy.store(unrounded + c);
          },
          [&](std::int64_t c) {
            const float dy = Act::grad(static_cast<float>(dzr[c]), static_cast<float>(xr[c]) * scale[c] + shift[c]);
            out[c] = static_cast<T>(dy);
            unrounded[c] = dy;  // for float the same place, the same value
          });
    }
  };
  const auto sums = reduce_columns<2>(
      shape,
      [&](const Tile& tile, std::int64_t r, std::int64_t c, auto* terms) {
        const float* dy = tile_dy(tile, r) + c;
        if constexpr (std::is_same_v<std::remove_pointer_t<decltype(terms)>, Vec>) {
          const Vec d = load(dy);
          terms[0] = d;
          terms[1] = d * ((load(x + r * C + c) - load(mean + c)) * load(invstd + c));
        } else {
          terms[0] = *dy;
          terms[1] = *dy * ((static_cast<float>(x[r * C + c]) - mean[c]) * invstd[c]);
        }
      },
      prepare);
  std::copy(sums.begin(), sums.begin() + C, sum_dy);
  std::copy(sums.begin() + C, sums.end(), sum_dy_xhat);
}

template <typename T>
void input_grad(const T* x, T* dy, BnSiluShape shape, const float* mean, const float* invstd, const float* gamma,
                const float* sum_dy, const float* sum_dy_xhat) {
  const std::int64_t C = shape.channels;
  const float inv_rows = 1.0f / static_cast<float>(shape.rows);
  // dx = k (dy - mean_dy - xhat mean_dy_xhat), k = gamma invstd
  std::vector<float> k(C), mean_dy(C), mean_dy_xhat(C);
  for (std::int64_t c = 0; c < C; ++c) {
    k[c] = gamma[c] * invstd[c];
    mean_dy[c] = sum_dy[c] * inv_rows;
    mean_dy_xhat[c] = sum_dy_xhat[c] * inv_rows;
  }
  auto grad_of = [&](const Vec& xv, const Vec& g, std::int64_t c) {
    const Vec xhat = (xv - load(mean + c)) * load(invstd + c);
    return load(k.data() + c) * (g - load(mean_dy.data() + c) - xhat * load(mean_dy_xhat.data() + c));
  };
  map_rows<T>(
      shape,
      [&](std::int64_t i, std::int64_t c) {
        Vec xa, xb, ga, gb;
        load2(x + i, xa, xb);
        load2(dy + i, ga, gb);
        store2(dy + i, grad_of(xa, ga, c), grad_of(xb, gb, c + kLanes));
      },
      [&](std::int64_t i, std::int64_t c) { store1(dy + i, grad_of(load(x + i), load(dy + i), c)); },
      [&](std::int64_t i, std::int64_t c) {
        const float xhat = (static_cast<float>(x[i]) - mean[c]) * invstd[c];
        dy[i] = static_cast<T>(k[c] * (static_cast<float>(dy[i]) - mean_dy[c] - xhat * mean_dy_xhat[c]));
      });
}

// NCHW planes (BnSiluPlanes), one channel at a time: a task takes whole channels, about 32k values.
std::int64_t channel_grain(BnSiluPlanes planes) {
  return std::max<std::int64_t>(1, 32768 / std::max<std::int64_t>(1, planes.batch * planes.plane));
}

// Adds to total[s] the sums over a span of n contiguous values of terms(i, out), which gives the
// terms of the vector at i (out: Vec[Sums]) or of the value at i (out: float[Sums]). Two float
// accumulators per sum (independent additions), the span's total added in double.
template <int Sums, typename Terms>
void add_span_sums(std::int64_t n, const Terms& terms, double* total) {
  Vec even[Sums], odd[Sums];
  for (int s = 0; s < Sums; ++s) even[s] = odd[s] = Vec(0.0f);
  std::int64_t i = 0;
  for (; i + 2 * kLanes <= n; i += 2 * kLanes) {
    Vec a[Sums], b[Sums];
    terms(i, a);
    terms(i + kLanes, b);
    for (int s = 0; s < Sums; ++s) {
      even[s] = even[s] + a[s];
      odd[s] = odd[s] + b[s];
    }
  }
  for (; i + kLanes <= n; i += kLanes) {
    Vec a[Sums];
    terms(i, a);
    for (int s = 0; s < Sums; ++s) even[s] = even[s] + a[s];
  }
  for (int s = 0; s < Sums; ++s) {
    float lanes[kLanes];
    (even[s] + odd[s]).store(lanes);
    for (const float v : lanes) total[s] += v;
  }
  for (; i < n; ++i) {
    float t[Sums];
    terms(i, t);
    for (int s = 0; s < Sums; ++s) total[s] += t[s];
  }
}

template <typename T>
void planar_forward(const T* x, T* z, BnSiluPlanes planes, const float* gamma, const float* beta, float eps, float* mean,
                    float* variance, float* invstd, float* scale, float* shift) {
  const std::int64_t C = planes.channels, P = planes.plane;
  const double count = static_cast<double>(planes.batch * P);
  at::parallel_for(0, C, channel_grain(planes), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t c = begin; c < end; ++c) {
      // Σ(x - x₀) and Σ(x - x₀)², x₀ a sampled mean of the channel's values, as stats() shifts
      const float origin = sampled_origin(planes.batch * P, [&](std::int64_t i) {
        return static_cast<double>(x[((i / P) * C + c) * P + i % P]);
      });
      const Vec o(origin);
      double sums[2] = {0.0, 0.0};
      for (std::int64_t n = 0; n < planes.batch; ++n) {
        const T* xp = x + (n * C + c) * P;
        add_span_sums<2>(
            P,
            [&](std::int64_t i, auto* terms) {
              if constexpr (std::is_same_v<std::remove_pointer_t<decltype(terms)>, Vec>) {
                const Vec d = load(xp + i) - o;
                terms[0] = d;
                terms[1] = d * d;
              } else {
                const float d = static_cast<float>(xp[i]) - origin;
                terms[0] = d;
                terms[1] = d * d;
              }
            },
            sums);
      }
      shifted_moments(origin, sums[0], sums[1], count, mean[c], variance[c]);
      fold_channel(mean[c], variance[c], gamma[c], beta[c], eps, invstd[c], scale[c], shift[c]);
      const float sc = scale[c], sh = shift[c];
      const Vec scv(sc), shv(sh);
      auto silu_of = [&](const Vec& in) {
        const Vec y = at::vec::fmadd(in, scv, shv);
        return y * sigmoid(y);
      };
      for (std::int64_t n = 0; n < planes.batch; ++n) {
        const T* xp = x + (n * C + c) * P;
        T* zp = z + (n * C + c) * P;
        over_span(
            P,
            [&](std::int64_t i) {
              Vec a, b;
              load2(xp + i, a, b);
              store2(zp + i, silu_of(a), silu_of(b));
            },
            [&](std::int64_t i) { store1(zp + i, silu_of(load(xp + i))); },
            [&](std::int64_t i) {
              const float y = static_cast<float>(xp[i]) * sc + sh;
              zp[i] = static_cast<T>(y * sigmoid(y));
            });
      }
    }
  });
}

template <typename T>
void planar_backward(const T* x, const T* dz, std::int64_t dz_batch_stride, std::int64_t dz_channel_stride, T* dx,
                     BnSiluPlanes planes, const float* scale, const float* shift, const float* mean, const float* invstd,
                     const float* gamma, float* sum_dy, float* sum_dy_xhat) {
  const std::int64_t C = planes.channels, P = planes.plane;
  const float inv_count = 1.0f / static_cast<float>(planes.batch * P);
  at::parallel_for(0, C, channel_grain(planes), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t c = begin; c < end; ++c) {
      const float sc = scale[c], sh = shift[c], m = mean[c], is = invstd[c];
      const Vec scv(sc), shv(sh), mv(m), isv(is);
      // pass 1: dy = dz silu'(y) (kept in dx, rounded to T, where dx is wanted), Σdy and Σdy x̂ unrounded
      double sums[2] = {0.0, 0.0};
      for (std::int64_t n = 0; n < planes.batch; ++n) {
        const T* xp = x + (n * C + c) * P;
        const T* dzp = dz + n * dz_batch_stride + c * dz_channel_stride;
        T* dyp = dx == nullptr ? nullptr : dx + (n * C + c) * P;
        add_span_sums<2>(
            P,
            [&](std::int64_t i, auto* terms) {
              if constexpr (std::is_same_v<std::remove_pointer_t<decltype(terms)>, Vec>) {
                const Vec xv = load(xp + i);
                const Vec dy = silu_grad(load(dzp + i), at::vec::fmadd(xv, scv, shv));
                if (dyp != nullptr) store1(dyp + i, dy);
                terms[0] = dy;
                terms[1] = dy * ((xv - mv) * isv);
              } else {
                const float xv = static_cast<float>(xp[i]);
                const float dy = silu_grad(static_cast<float>(dzp[i]), xv * sc + sh);
                if (dyp != nullptr) dyp[i] = static_cast<T>(dy);
                terms[0] = dy;
                terms[1] = dy * ((xv - m) * is);
              }
            },
            sums);
      }
      sum_dy[c] = static_cast<float>(sums[0]);
      sum_dy_xhat[c] = static_cast<float>(sums[1]);
      if (dx == nullptr) continue;
      // pass 2, in place: dx = k (dy - mean_dy - x̂ mean_dy_xhat), k = gamma invstd, as input_grad()
      const float k = gamma[c] * is, mean_dy = sum_dy[c] * inv_count, mean_dy_xhat = sum_dy_xhat[c] * inv_count;
      const Vec kv(k), mean_dyv(mean_dy), mean_dy_xhatv(mean_dy_xhat);
      auto grad_of = [&](const Vec& xv, const Vec& g) { return kv * (g - mean_dyv - (xv - mv) * isv * mean_dy_xhatv); };
      for (std::int64_t n = 0; n < planes.batch; ++n) {
        const T* xp = x + (n * C + c) * P;
        T* dyp = dx + (n * C + c) * P;
        over_span(
            P,
            [&](std::int64_t i) {
              Vec xa, xb, ga, gb;
              load2(xp + i, xa, xb);
              load2(dyp + i, ga, gb);
              store2(dyp + i, grad_of(xa, ga), grad_of(xb, gb));
            },
            [&](std::int64_t i) { store1(dyp + i, grad_of(load(xp + i), load(dyp + i))); },
            [&](std::int64_t i) {
              const float xhat = (static_cast<float>(xp[i]) - m) * is;
              dyp[i] = static_cast<T>(k * (static_cast<float>(dyp[i]) - mean_dy - xhat * mean_dy_xhat));
            });
      }
    }
  });
}

template <typename T>
BnSiluKernels<T> kernels_for() {
  return {&stats<T>,         &apply<T, Silu>,           &reduce<T, Silu>,      &input_grad<T>,
          &planar_forward<T>, &planar_backward<T>, &apply<T, Relu>, &reduce<T, Relu>};
}

#define LIBREYOLO_STRINGIFY2(x) #x
#define LIBREYOLO_STRINGIFY(x) LIBREYOLO_STRINGIFY2(x)

}  // namespace

BnSiluKernelSet kernel_set() {
  return {LIBREYOLO_STRINGIFY(CPU_CAPABILITY), kernels_for<float>(), kernels_for<c10::BFloat16>()};
}

}  // namespace libreyolo::nn::kernels::CPU_CAPABILITY
