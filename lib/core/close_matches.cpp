#include "core/close_matches.h"

#include <algorithm>

namespace libreyolo {

namespace {

// Characters matched by recursively taking the longest common block, then matching the
// pieces to its left and right (difflib.SequenceMatcher.get_matching_blocks without junk).
std::size_t matched_characters(std::string_view a, std::string_view b) {
  if (a.empty() || b.empty()) return 0;
  std::size_t best_length = 0;
  std::size_t best_a = 0;
  std::size_t best_b = 0;
  std::vector<std::size_t> previous(b.size() + 1, 0);
  std::vector<std::size_t> current(b.size() + 1, 0);
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      current[j] = a[i - 1] == b[j - 1] ? previous[j - 1] + 1 : 0;
      // Strictly greater keeps the earliest block in a, as difflib does.
      if (current[j] > best_length) {
        best_length = current[j];
        best_a = i - best_length;
        best_b = j - best_length;
      }
    }
    std::swap(previous, current);
  }
  if (best_length == 0) return 0;
  return best_length + matched_characters(a.substr(0, best_a), b.substr(0, best_b)) +
         matched_characters(a.substr(best_a + best_length), b.substr(best_b + best_length));
}

}  // namespace

double similarity_ratio(std::string_view a, std::string_view b) {
  const std::size_t total = a.size() + b.size();
  if (total == 0) return 1.0;
  return 2.0 * static_cast<double>(matched_characters(a, b)) / static_cast<double>(total);
}

std::vector<std::string> close_matches(std::string_view word, std::span<const std::string_view> candidates,
                                       std::size_t max_results, double cutoff) {
  std::vector<std::pair<double, std::string_view>> scored;
  for (const auto candidate : candidates) {
    const double score = similarity_ratio(word, candidate);
    if (score >= cutoff) scored.emplace_back(score, candidate);
  }
  std::stable_sort(scored.begin(), scored.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
  std::vector<std::string> result;
  for (std::size_t i = 0; i < scored.size() && i < max_results; ++i) result.emplace_back(scored[i].second);
  return result;
}

}  // namespace libreyolo
