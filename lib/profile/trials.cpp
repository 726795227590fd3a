#include "profile/trials.h"

#include <cmath>

namespace libreyolo::profile {

namespace {

constexpr const char* kAveraged[] = {"step_ms", "gpu_util", "gpu_util_raw", "gpu_busy_ms_per_step", "mean_kernel_us",
                                     "kernels_per_step", "memcpy_ms_per_step", "host_overhead_ms_per_step",
                                     "launches_per_step", "dataload_ms", "dataload_frac", "tensorcore_pct",
                                     "cuda_mallocs_per_step", "cpu_util", "cpu_busy_ms_per_step", "host_syncs_per_step"};

// The same figures under their `metrics` names (profile get).
const char* metric_name(const std::string& key) {
  if (key == "gpu_busy_ms_per_step") return "gpu_busy_ms";
  if (key == "memcpy_ms_per_step") return "memcpy_ms";
  if (key == "host_overhead_ms_per_step") return "host_overhead_ms";
  if (key == "cpu_busy_ms_per_step") return "cpu_busy_ms";
  return nullptr;
}

std::optional<double> number(const nlohmann::ordered_json& j, const char* key) {
  return j.contains(key) && j[key].is_number() ? std::optional<double>(j[key].get<double>()) : std::nullopt;
}

}  // namespace

nlohmann::ordered_json aggregate_trials(const std::vector<nlohmann::ordered_json>& trials, const std::vector<std::string>& paths) {
  nlohmann::ordered_json out = trials.back();
  std::vector<double> rates;
  for (const auto& t : trials) {
    if (const auto r = number(t, "img_per_s")) rates.push_back(*r);
  }
  double mean = 0, variance = 0;
  for (const double r : rates) mean += r / static_cast<double>(rates.size());
  for (const double r : rates) variance += (r - mean) * (r - mean) / static_cast<double>(rates.size());
  out["img_per_s"] = mean;
  out["img_per_s_std"] = std::sqrt(variance);  // population standard deviation, as LibreYOLO
  out["img_per_s_n"] = rates.size();
  out["img_per_s_trials"] = rates;
  out["metrics"]["img_per_s"] = mean;
  for (const char* key : kAveraged) {
    double sum = 0;
    int count = 0;
    bool all_integers = true;
    for (const auto& t : trials) {
      if (!t.contains(key) || !t[key].is_number()) continue;
      sum += t[key].get<double>();
      all_integers = all_integers && t[key].is_number_integer();
      ++count;
    }
    if (count == 0) continue;
    const double value = sum / count;
    out[key] = all_integers && value == std::floor(value) ? nlohmann::ordered_json(static_cast<std::int64_t>(value)) : nlohmann::ordered_json(value);
    if (out["metrics"].contains(key)) out["metrics"][key] = out[key];
    if (const char* alias = metric_name(key)) out["metrics"][alias] = out[key];
  }
  bool same = true;
  for (const auto& t : trials) same = same && t.value("bound", "") == trials.front().value("bound", "");
  if (!same) {
    out["bound"] = "mixed";
    out["bound_why"] = "repeat trials produced mixed bottleneck verdicts";
    out["metrics"]["bound"] = "mixed";
  }
  out["aggregation"] = {{"n", trials.size()},
                        {"profiles", paths},
                        {"representative_profile", paths.back()},
                        {"note", "scalar metrics are averaged; kernel lists and trace view use the final trial."}};
  return out;
}

std::optional<bool> significant_difference(double mean_a, double sd_a, int n_a, double mean_b, double sd_b, int n_b) {
  if (n_a < 2 || n_b < 2) return std::nullopt;
  return std::abs(mean_b - mean_a) > 2 * std::sqrt(sd_a * sd_a / n_a + sd_b * sd_b / n_b);
}

nlohmann::ordered_json compare_profiles(const nlohmann::ordered_json& a, const nlohmann::ordered_json& b) {
  const auto batch = [](const nlohmann::ordered_json& p) {
    return p.contains("config") && p["config"].contains("batch") && p["config"]["batch"].is_number() ? p["config"]["batch"].get<double>() : 0.0;
  };
  const auto row = [](const char* name, std::optional<double> before, std::optional<double> after) {
    nlohmann::ordered_json r = {{"metric", name},
                                {"before", before ? nlohmann::ordered_json(*before) : nlohmann::ordered_json(nullptr)},
                                {"after", after ? nlohmann::ordered_json(*after) : nlohmann::ordered_json(nullptr)}};
    if (before && after) {
      r["delta"] = *after - *before;
      r["delta_pct"] = *before != 0 ? nlohmann::ordered_json(100 * (*after - *before) / *before) : nlohmann::ordered_json(nullptr);
    }
    return r;
  };
  const auto per_image = [&](const nlohmann::ordered_json& p) -> std::optional<double> {
    const auto step = number(p, "step_ms");
    return step && batch(p) > 0 ? std::optional<double>(*step / batch(p)) : std::nullopt;
  };
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  auto rate = row("img/s", number(a, "img_per_s"), number(b, "img_per_s"));
  const int n_a = a.value("img_per_s_n", 1), n_b = b.value("img_per_s_n", 1);
  const auto sig = significant_difference(number(a, "img_per_s").value_or(0), number(a, "img_per_s_std").value_or(0), n_a,
                                          number(b, "img_per_s").value_or(0), number(b, "img_per_s_std").value_or(0), n_b);
  rate["significant"] = sig ? nlohmann::ordered_json(*sig) : nlohmann::ordered_json(nullptr);
  rate["n"] = {n_a, n_b};
  rows.push_back(rate);
  rows.push_back(row("ms/image", per_image(a), per_image(b)));
  rows.push_back(row("gpu_util", number(a, "gpu_util"), number(b, "gpu_util")));
  rows.push_back(row("cpu_util", number(a, "cpu_util"), number(b, "cpu_util")));
  rows.push_back(row("host_overhead_ms", number(a, "host_overhead_ms_per_step"), number(b, "host_overhead_ms_per_step")));
  rows.push_back(row("launches_per_step", number(a, "launches_per_step"), number(b, "launches_per_step")));
  rows.push_back(row("host_syncs_per_step", number(a, "host_syncs_per_step"), number(b, "host_syncs_per_step")));
  rows.push_back(row("dataload_frac", number(a, "dataload_frac"), number(b, "dataload_frac")));
  return {{"rows", rows}, {"bound", {{"before", a.value("bound", "")}, {"after", b.value("bound", "")}}},
          {"note", sig ? "significant: |Δ img/s| > 2 standard errors" : "significance needs n >= 2 on both sides (profile run --repeat N)"}};
}

}  // namespace libreyolo::profile
