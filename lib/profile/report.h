// The console report of a profile (LibreYOLO's layout; a CPU run shows operator figures where a
// GPU run shows kernels).
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace libreyolo::profile {

std::string format_report(const nlohmann::ordered_json& profile, const std::string& timeline_path,
                          const std::string& trace_path);

}  // namespace libreyolo::profile
