#include "profile/timeline.h"

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/share_files.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <sstream>

namespace libreyolo::profile {

namespace {

enum Lane { phase_cpu = 0, cpu_ops = 1, phase_gpu = 2, gpu_kernels = 3, gpu_memcpy = 4 };

struct Item {
  int lane;
  double start_us, duration_us;
  std::string name, phase;
};

// Keeps the `limit` longest items at least `min_us` long.
void keep_longest(std::vector<Item>& items, double min_us, std::size_t limit) {
  std::erase_if(items, [&](const Item& i) { return i.duration_us < min_us; });
  if (items.size() > limit) {
    std::nth_element(items.begin(), items.begin() + static_cast<long>(limit), items.end(),
                     [](const Item& a, const Item& b) { return a.duration_us > b.duration_us; });
    items.resize(limit);
  }
}

}  // namespace

nlohmann::json timeline_data(const Trace& trace, const nlohmann::ordered_json& profile) {
  std::vector<Item> phase_items, ops, kernels, copies;
  const auto launches = launches_by_correlation(trace.events);
  std::vector<std::pair<double, const Event*>> launched;  // (launch time on the CPU, kernel)
  std::vector<const Event*> phase_spans;
  for (const auto& e : trace.events) {
    if (e.category == category::annotation) {
      const std::string phase = phase_of_annotation(e.name);
      phase_items.push_back({phase_cpu, e.start_us, e.duration_us, e.name, phase.empty() ? "step" : phase});
      if (!phase.empty()) phase_spans.push_back(&e);
    } else if (e.category == category::cpu_op) {
      ops.push_back({cpu_ops, e.start_us, e.duration_us, e.name, ""});
    } else if (e.category == category::kernel) {
      kernels.push_back({gpu_kernels, e.start_us, e.duration_us, e.name, ""});
      if (const auto launch = launches.find(e.correlation); launch != launches.end()) launched.emplace_back(launch->second->start_us, &e);
    } else if (e.category == category::memcpy || e.category == category::memset) {
      copies.push_back({gpu_memcpy, e.start_us, e.duration_us, e.name, ""});
    }
  }
  // A phase on the GPU: from the first to the last kernel launched during the CPU phase.
  std::vector<Item> gpu_phases;
  std::sort(launched.begin(), launched.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const Event* span : phase_spans) {
    double first = INFINITY, last = -INFINITY;
    auto it = std::lower_bound(launched.begin(), launched.end(), span->start_us, [](const auto& k, double t) { return k.first < t; });
    for (; it != launched.end() && it->first < span->end_us(); ++it) {
      first = std::min(first, it->second->start_us), last = std::max(last, it->second->end_us());
    }
    if (std::isfinite(first)) gpu_phases.push_back({phase_gpu, first, last - first, span->name + " (GPU)", phase_of_annotation(span->name)});
  }
  keep_longest(ops, 20, 1500);
  keep_longest(kernels, 2, 2500);

  std::vector<Item> items;
  for (auto* group : {&phase_items, &ops, &gpu_phases, &kernels, &copies}) {
    items.insert(items.end(), std::make_move_iterator(group->begin()), std::make_move_iterator(group->end()));
  }
  double origin = INFINITY, end = -INFINITY;
  for (const auto& i : items) origin = std::min(origin, i.start_us), end = std::max(end, i.start_us + i.duration_us);
  if (!std::isfinite(origin)) origin = end = 0;
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
    return a.lane != b.lane ? a.lane < b.lane : a.start_us < b.start_us;
  });
  // Greedy row packing per lane: the first row whose last item has ended.
  std::vector<std::vector<double>> row_ends(5);
  nlohmann::json events = nlohmann::json::array();
  for (const auto& i : items) {
    auto& ends = row_ends[static_cast<std::size_t>(i.lane)];
    std::size_t row = 0;
    while (row < ends.size() && ends[row] > i.start_us) ++row;
    if (row == ends.size()) ends.push_back(0);
    ends[row] = i.start_us + i.duration_us;
    nlohmann::json e = {{"lane", i.lane}, {"row", row}, {"s", (i.start_us - origin) / 1000.0}, {"d", i.duration_us / 1000.0}, {"name", i.name}};
    if (!i.phase.empty()) e["phase"] = i.phase;
    events.push_back(std::move(e));
  }
  nlohmann::json flows = nlohmann::json::array();
  for (const auto& f : trace.flows) {
    if (flows.size() >= 4000) break;
    flows.push_back({{"from", (f.from_us - origin) / 1000.0}, {"to", (f.to_us - origin) / 1000.0}});
  }
  nlohmann::json lane_rows = nlohmann::json::array();
  for (const auto& ends : row_ends) lane_rows.push_back(ends.size());

  nlohmann::json analysis;
  for (const char* key : {"model", "device_kind", "bound", "bound_why", "levers", "step_ms", "img_per_s", "dataload_frac",
                          "gpu_util", "gpu_busy_ms_per_step", "kernels_per_step", "memcpy_ms_per_step", "peak_vram_mb",
                          "tensorcore_pct", "cpu_util", "cpu_busy_ms_per_step", "cpu_window_step_ms", "categories", "top_kernels"}) {
    analysis[key] = profile.contains(key) ? nlohmann::json::parse(profile[key].dump()) : nlohmann::json(nullptr);
  }
  nlohmann::json top_ops = nlohmann::json::array();
  if (profile.contains("ops")) {
    for (const auto& o : profile["ops"]) {
      if (top_ops.size() == 8) break;
      top_ops.push_back(nlohmann::json::parse(o.dump()));
    }
  }
  analysis["top_ops"] = top_ops;
  return {{"lanes", {"phase · CPU", "CPU ops", "phase · GPU", "GPU kernels", "GPU memcpy"}},
          {"events", events},
          {"flows", flows},
          {"lane_rows", lane_rows},
          {"total_ms", (end - origin) / 1000.0},
          {"meta", profile.contains("config") ? nlohmann::json::parse(profile["config"].dump()) : nlohmann::json::object()},
          {"analysis", analysis}};
}

void write_timeline(const std::filesystem::path& path, const Trace& trace, const nlohmann::ordered_json& profile) {
  const auto template_path = find_share_file("timeline.html");
  std::ifstream in(template_path, std::ios::binary);
  std::string page((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  static constexpr std::string_view marker = "/*__DATA__*/";
  const auto at = page.find(marker);
  if (at == std::string::npos) throw RuntimeError(fmt::format("{}: the timeline template has no {} marker", template_path.string(), marker));
  std::string data = timeline_data(trace, profile).dump();
  // "</" inside a <script> would end it early.
  for (std::size_t i = data.find("</"); i != std::string::npos; i = data.find("</", i + 3)) data.replace(i, 2, "<\\/");
  page.replace(at, marker.size(), data);
  write_file_atomically(path, page);
}

}  // namespace libreyolo::profile
