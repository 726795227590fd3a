#include "profile/summary.h"

#include "core/error.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>

namespace libreyolo::profile {

namespace {

constexpr double kMaxMeasurement = 1e9;  // ms (11.6 days for one step), MB, calls: anything above is not a measurement

template <typename T>
nlohmann::ordered_json optional_json(const std::optional<T>& value) {
  return value ? nlohmann::ordered_json(*value) : nlohmann::ordered_json(nullptr);
}

}  // namespace

double StepSummary::images_per_second() const {
  const double batch = meta.contains("batch") && meta["batch"].is_number() ? meta["batch"].get<double>() : 0.0;
  return step_ms > 0 ? batch / (step_ms / 1000.0) : 0.0;
}

bool StepSummary::amp() const { return meta.contains("amp") && meta["amp"].is_boolean() && meta["amp"].get<bool>(); }

std::optional<double> StepSummary::cpu_bf16_speedup() const {
  if (!meta.contains("cpu_bf16_speedup") || !meta["cpu_bf16_speedup"].is_number()) return std::nullopt;
  return meta["cpu_bf16_speedup"].get<double>();
}

nlohmann::ordered_json summary_to_json(const StepSummary& s) {
  nlohmann::ordered_json composition = nlohmann::ordered_json::object();
  double total = 0;
  for (const char* phase : kSyncedPhases) {
    const auto found = s.composition_ms.find(phase);
    const double ms = found == s.composition_ms.end() ? 0.0 : found->second;
    composition[phase] = rounded(ms, 3);
    total += ms;
  }
  nlohmann::ordered_json j;
  j["meta"] = s.meta;
  j["window"] = {{"warmup", s.warmup}, {"real_steps", s.real_steps}, {"synced_steps", s.synced_steps}};
  j["real"] = {{"step_ms", rounded(s.step_ms, 3)},
               {"dataload_ms", rounded(s.dataload_ms, 3)},
               {"compute_ms", rounded(s.compute_ms(), 3)},
               {"img_per_s", rounded(s.images_per_second(), 2)},
               {"dataload_frac", rounded(s.dataload_fraction(), 3)}};
  j["composition_ms"] = composition;
  j["composition_total_ms"] = total > 0 ? rounded(total, 3) : 1.0;
  // the parts a family marks inside a phase ("forward/matcher"), already counted in their phase
  nlohmann::ordered_json parts = nlohmann::ordered_json::object();
  for (const auto& [name, ms] : s.composition_ms) {
    if (name.find('/') != std::string::npos) parts[name] = rounded(ms, 3);
  }
  j["parts_ms"] = parts;
  j["device_kind"] = s.device_kind;
  j["gpu_trace"] = {{"available", s.kernels_measured},
                    {"reason", s.kernels_measured ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(s.trace_missing_reason)}};
  j["trace_missing_reason"] = s.trace_missing_reason.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(s.trace_missing_reason);
  j["peak_vram_mb"] = optional_json(s.peak_vram_mb);
  j["allocator_calls_per_step"] = optional_json(s.allocator_calls_per_step);
  j["trace"] = optional_json(s.trace);
  j["ops_window"] = s.ops_in_synced_half ? "synced" : "real";
  if (!s.ranks.empty()) {
    nlohmann::ordered_json ranks = nlohmann::ordered_json::array();
    for (const auto& r : s.ranks) {
      ranks.push_back({{"rank", r.rank}, {"step_ms", rounded(r.step_ms, 3)}, {"dataload_ms", rounded(r.dataload_ms, 3)}});
    }
    j["ranks"] = ranks;
  }
  return j;
}

StepSummary summary_from_json(const nlohmann::json& j, const std::string& source_name) {
  const auto need = [&](const nlohmann::json& parent, const char* key) -> const nlohmann::json& {
    if (!parent.is_object() || !parent.contains(key)) {
      throw UsageError(fmt::format("{}: not a profile summary (no \"{}\" key)", source_name, key));
    }
    return parent[key];
  };
  // Counts and times: numbers in a sane range, or the file is refused with the key's name.
  const auto count = [&](const nlohmann::json& parent, const char* key) {
    const auto& value = need(parent, key);
    if (!value.is_number_integer() || value.get<std::int64_t>() < 0 || value.get<std::int64_t>() > 10'000'000) {
      throw UsageError(fmt::format("{}: \"{}\" is {}; expected a step count from 0 to 10000000", source_name, key, value.dump()));
    }
    return static_cast<int>(value.get<std::int64_t>());
  };
  const auto measured = [&](const nlohmann::json& value, const std::string& key) {
    if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() < 0 || value.get<double>() > kMaxMeasurement) {
      throw UsageError(fmt::format("{}: \"{}\" is {}; expected a measurement from 0 to {:g}", source_name, key, value.dump(), kMaxMeasurement));
    }
    return value.get<double>();
  };
  StepSummary s;
  s.meta = need(j, "meta");
  if (!s.meta.is_object()) throw UsageError(fmt::format("{}: \"meta\" is not an object", source_name));
  for (const char* key : {"model", "device", "amp_dtype"}) {  // amp_dtype is null without AMP
    const auto found = s.meta.find(key);
    if (found != s.meta.end() && !found->is_string() && !(found->is_null() && std::string_view(key) == "amp_dtype")) {
      throw UsageError(fmt::format("{}: meta \"{}\" is {}; expected text", source_name, key, found->dump()));
    }
  }
  if (const auto batch = s.meta.find("batch"); batch != s.meta.end() && !(batch->is_number_integer() && batch->get<std::int64_t>() > 0)) {
    throw UsageError(fmt::format("{}: meta \"batch\" is {}; expected a positive whole number", source_name, batch->dump()));
  }
  const auto& window = need(j, "window");
  s.warmup = count(window, "warmup");
  s.real_steps = count(window, "real_steps");
  s.synced_steps = count(window, "synced_steps");
  const auto& real = need(j, "real");
  s.step_ms = measured(need(real, "step_ms"), "step_ms");
  s.dataload_ms = measured(need(real, "dataload_ms"), "dataload_ms");
  for (const char* key : {"composition_ms", "parts_ms"}) {
    if (!j.contains(key) || !j[key].is_object()) continue;
    for (const auto& [phase, ms] : j[key].items()) {
      if (ms.is_number()) s.composition_ms[phase] = measured(ms, std::string(key) + "." + phase);
    }
  }
  // A LibreYOLO (Python) summary has no device_kind: its meta.device tells.
  const std::string device = s.meta.value("device", std::string("cpu"));
  s.device_kind = j.value("device_kind", device.rfind("cuda", 0) == 0 || (!device.empty() && std::isdigit(static_cast<unsigned char>(device[0])))
                                             ? std::string("cuda") : std::string("cpu"));
  if (j.contains("gpu_trace") && j["gpu_trace"].is_object()) {
    s.kernels_measured = j["gpu_trace"].value("available", false);
    if (j["gpu_trace"].contains("reason") && j["gpu_trace"]["reason"].is_string()) s.trace_missing_reason = j["gpu_trace"]["reason"];
  } else {
    s.kernels_measured = s.device_kind == "cuda";
  }
  if (j.contains("trace_missing_reason") && j["trace_missing_reason"].is_string()) s.trace_missing_reason = j["trace_missing_reason"];
  if (j.contains("peak_vram_mb") && j["peak_vram_mb"].is_number()) s.peak_vram_mb = measured(j["peak_vram_mb"], "peak_vram_mb");
  if (j.contains("allocator_calls_per_step") && j["allocator_calls_per_step"].is_number()) {
    s.allocator_calls_per_step = measured(j["allocator_calls_per_step"], "allocator_calls_per_step");
  }
  if (j.contains("trace") && j["trace"].is_string()) s.trace = j["trace"].get<std::string>();
  s.ops_in_synced_half = j.value("ops_window", std::string("real")) == "synced";
  if (j.contains("ranks")) {
    if (!j["ranks"].is_array()) throw UsageError(fmt::format("{}: \"ranks\" is not a list", source_name));
    for (const auto& r : j["ranks"]) {
      s.ranks.push_back({.rank = count(r, "rank"), .step_ms = measured(need(r, "step_ms"), "ranks.step_ms"),
                         .dataload_ms = measured(need(r, "dataload_ms"), "ranks.dataload_ms")});
    }
  }
  return s;
}

}  // namespace libreyolo::profile
