// timeline.html: one self-contained page (no network) with lanes for phases, CPU operators,
// GPU phases, kernels and memcpy, zoom/pan/tooltips and the analysis panel. The page is
// share/libreyolo/timeline.html with the curated trace data put in place of its marker.
#pragma once

#include "profile/trace.h"

#include <nlohmann/json.hpp>

#include <filesystem>

namespace libreyolo::profile {

// The data the page draws: {lanes, events, flows, lane_rows, total_ms, meta, analysis}.
nlohmann::json timeline_data(const Trace& trace, const nlohmann::ordered_json& profile);

void write_timeline(const std::filesystem::path& path, const Trace& trace, const nlohmann::ordered_json& profile);

}  // namespace libreyolo::profile
