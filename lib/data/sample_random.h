// Per-sample randomness: every sample's random draws derive from (seed, epoch, index) only, so
// batches are identical whatever the number of workers or the order they run in.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>

namespace libreyolo::data {

// splitmix64: a strong mixer for turning (seed, epoch, index) into an engine seed.
inline std::uint64_t mix64(std::uint64_t value) {
  value += 0x9E3779B97F4A7C15ull;
  value = (value ^ (value >> 30)) * 0xBF58476D1CE4E5B9ull;
  value = (value ^ (value >> 27)) * 0x94D049BB133111EBull;
  return value ^ (value >> 31);
}

class SampleRandom {
 public:
  SampleRandom(std::uint64_t seed, std::uint64_t epoch, std::uint64_t index)
      : engine_(mix64(mix64(mix64(seed) ^ epoch) ^ index)) {}

  double uniform(double low, double high) { return std::uniform_real_distribution<double>(low, high)(engine_); }
  bool chance(double probability) { return probability > 0 && uniform(0.0, 1.0) < probability; }
  int integer(int low, int high_inclusive) { return std::uniform_int_distribution<int>(low, high_inclusive)(engine_); }
  // An independent stream for a sub-task (e.g. a mixup partner's own augmentation).
  SampleRandom split() { return SampleRandom(engine_(), 0, 0); }
  double beta(double a, double b) {
    const double x = std::gamma_distribution<double>(a, 1.0)(engine_);
    const double y = std::gamma_distribution<double>(b, 1.0)(engine_);
    return x / (x + y);
  }

 private:
  std::mt19937_64 engine_;
};

}  // namespace libreyolo::data
