// What the step profiler measured itself, without any trace: the window, the real
// (unsynchronised) step and data-wait times, the synchronised phase composition and the
// allocator figures. Written as profile_summary.json; the analysis reads it back.
#pragma once

#include <nlohmann/json.hpp>

#include <array>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace libreyolo::profile {

// Phases timed in the synchronised half, in step order.
inline constexpr std::array<const char*, 4> kSyncedPhases{"to_device", "forward", "backward", "optimizer"};
// Every phase a report lists, in step order (others, such as "unphased", follow).
inline constexpr std::array<const char*, 7> kPhaseOrder{"dataload", "to_device", "preprocess", "forward",
                                                        "backward", "postprocess", "optimizer"};

// `value` rounded to `digits` decimals, as the JSON files store figures.
inline double rounded(double value, int digits) {
  const double scale = std::pow(10.0, digits);
  return std::round(value * scale) / scale;
}

// One data-parallel rank's real (unsynchronised) step, gathered to rank 0 when the window closes.
struct RankTiming {
  int rank = 0;
  double step_ms = 0;
  double dataload_ms = 0;
};

struct StepSummary {
  nlohmann::ordered_json meta = nlohmann::ordered_json::object();  // model, device, batch, imgsz, amp, amp_dtype, workers
  int warmup = 0;
  int real_steps = 0;    // the unsynchronised half
  int synced_steps = 0;  // the synchronised half
  double step_ms = 0;      // mean real step: batch fetch start -> end of the iteration
  double dataload_ms = 0;  // mean wait for the next batch
  std::map<std::string, double> composition_ms;  // synchronised means per phase
  std::string device_kind = "cpu";               // "cuda" or "cpu"
  bool kernels_measured = false;                 // a GPU kernel trace exists (CUDA only)
  std::string trace_missing_reason;              // why no kernel (GPU) or operator (CPU) trace exists
  std::optional<double> peak_vram_mb;
  std::optional<double> allocator_calls_per_step;  // caching-allocator device mallocs + frees, unsynced half
  std::optional<std::string> trace;                // path of profile_trace.json
  // CPU operators were recorded in the synchronised half only (their recording would inflate the
  // real step time); the analysis reads them there.
  bool ops_in_synced_half = false;
  // Data-parallel runs: every rank's timing, in rank order (empty for one process).
  std::vector<RankTiming> ranks;

  double compute_ms() const { return std::max(step_ms - dataload_ms, 0.0); }
  double dataload_fraction() const { return step_ms > 0 ? dataload_ms / step_ms : 0.0; }
  double images_per_second() const;
  bool amp() const;
  std::optional<double> cpu_bf16_speedup() const;  // meta's, where the run measured it
};

nlohmann::ordered_json summary_to_json(const StepSummary& summary);
// Throws UsageError naming `source_name` when a required key is missing.
StepSummary summary_from_json(const nlohmann::json& json, const std::string& source_name);

}  // namespace libreyolo::profile
