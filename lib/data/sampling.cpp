#include "data/sampling.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace libreyolo::data {

std::vector<double> repeat_factors(const Dataset& dataset, int class_count, double alpha) {
  const std::size_t n = dataset.size();
  std::vector<std::set<int>> classes(n);
  std::vector<double> frequency(static_cast<std::size_t>(std::max(0, class_count)), 0.0);
  for (std::size_t i = 0; i < n; ++i) {
    for (const int c : dataset.image_classes(i)) {
      if (c >= 0 && c < class_count) classes[i].insert(c);
    }
    for (const int c : classes[i]) frequency[static_cast<std::size_t>(c)] += 1.0 / static_cast<double>(n);
  }
  std::vector<double> positive;
  for (const double f : frequency) {
    if (f > 0) positive.push_back(f);
  }
  std::vector<double> weights(n, 1.0);
  if (positive.empty()) return weights;
  std::sort(positive.begin(), positive.end());
  const std::size_t m = positive.size();
  const double threshold = m % 2 ? positive[m / 2] : (positive[m / 2 - 1] + positive[m / 2]) / 2;  // numpy's median
  for (std::size_t i = 0; i < n; ++i) {
    if (classes[i].empty()) continue;
    double weight = 0;
    for (const int c : classes[i]) {
      const double f = frequency[static_cast<std::size_t>(c)];
      weight = std::max(weight, f < threshold ? std::pow(threshold / f, alpha) : 1.0);
    }
    weights[i] = weight;
  }
  return weights;
}

}  // namespace libreyolo::data
