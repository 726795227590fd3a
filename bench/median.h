// What every C++ benchmark reports: the median of its repeated timings (these machines are shared and noisy).
#pragma once

#include <algorithm>
#include <vector>

namespace libreyolo::bench {

inline double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values.empty() ? 0.0 : values[values.size() / 2];
}

}  // namespace libreyolo::bench
