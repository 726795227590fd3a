// Several profile runs of one configuration: the repeat aggregate (means, the spread of img/s,
// the verdicts agreed or "mixed") and the before/after comparison that calls a difference
// significant only when both sides have n >= 2 and it exceeds two standard errors.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace libreyolo::profile {

nlohmann::ordered_json aggregate_trials(const std::vector<nlohmann::ordered_json>& trials, const std::vector<std::string>& paths);

// |mean_b - mean_a| > 2 * sqrt(sd_a^2 / n_a + sd_b^2 / n_b); nullopt when either n < 2.
std::optional<bool> significant_difference(double mean_a, double sd_a, int n_a, double mean_b, double sd_b, int n_b);

nlohmann::ordered_json compare_profiles(const nlohmann::ordered_json& before, const nlohmann::ordered_json& after);

}  // namespace libreyolo::profile
