// "Did you mean" suggestions with Python difflib's semantics (Ratcliff/Obershelp ratio,
// cutoff 0.6, best first), so a typo gets the same hints as in LibreYOLO and Ultralytics.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace libreyolo {

// 2*M/T where M is the number of characters in matching blocks and T the total length.
double similarity_ratio(std::string_view a, std::string_view b);

std::vector<std::string> close_matches(std::string_view word, std::span<const std::string_view> candidates,
                                       std::size_t max_results = 3, double cutoff = 0.6);

}  // namespace libreyolo
