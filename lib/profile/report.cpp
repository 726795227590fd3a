#include "profile/report.h"

#include "profile/verdict.h"

#include <fmt/format.h>

#include <map>
#include <string>

namespace libreyolo::profile {

namespace {

double number(const nlohmann::ordered_json& j, const char* key, double fallback = 0) {
  return j.is_object() && j.contains(key) && j[key].is_number() ? j[key].get<double>() : fallback;
}

// A field of the wrong type reads as its fallback: a profile.json that passed check_profile may
// still hold nulls or other types in fields the report shows.
long long whole(const nlohmann::ordered_json& j, const char* key) { return static_cast<long long>(number(j, key)); }

std::string text(const nlohmann::ordered_json& j, const char* key, const char* fallback = "") {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string(fallback);
}

bool flag(const nlohmann::ordered_json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_boolean() && j[key].get<bool>();
}

std::string text_of(const nlohmann::ordered_json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_null()) return "-";
  return value.dump();
}

std::string bar(double percent) {
  const int filled = static_cast<int>(percent / 5.0 + 0.5);
  std::string s;
  for (int i = 0; i < 20; ++i) s += i < filled ? '#' : '.';
  return s;
}

}  // namespace

std::string format_report(const nlohmann::ordered_json& p, const std::string& timeline_path, const std::string& trace_path) {
  std::string out;
  const auto line = [&](const std::string& text) { out += text + "\n"; };
  const auto top_rows = [&](const char* title, const nlohmann::ordered_json& rows, const char* pct_key, const char* name_key) {
    line(title);
    for (std::size_t i = 0; i < rows.size() && i < 6; ++i) {
      line(fmt::format("    {:5.1f}%  {:7.3f} ms  x{:<4} {}", number(rows[i], pct_key), number(rows[i], "ms_per_step"),
                       whole(rows[i], "count_per_step"), text(rows[i], name_key)));
    }
  };
  const std::string rule(64, '=');
  const auto& config = p.value("config", nlohmann::ordered_json::object());
  const bool gpu = text(p, "device_kind", "cpu") == "cuda";
  line(rule);
  line(fmt::format("  LibreYOLO training profile — {}", text(p, "model", "?")));
  const std::string processes = config.contains("world_size") ? fmt::format(" ({} processes)", text_of(config["world_size"])) : "";
  line(fmt::format("  device={} batch={}{} imgsz={} amp={} workers={}", text_of(config.value("device", nlohmann::ordered_json())),
                   text_of(config.value("batch", nlohmann::ordered_json())), processes, text_of(config.value("imgsz", nlohmann::ordered_json())),
                   text_of(config.value("amp", nlohmann::ordered_json())), text_of(config.value("workers", nlohmann::ordered_json()))));
  const double step = number(p, "step_ms"), dataload = number(p, "dataload_ms");
  line(fmt::format("  REAL step {:.1f} ms = dataload {:.1f} ms + compute {:.1f} ms  ->  {:.1f} img/s", step, dataload,
                   std::max(step - dataload, 0.0), number(p, "img_per_s")));
  if (gpu && flag(p["gpu_trace"], "available")) {
    line(fmt::format("  GPU util {:.0f}%  ({:.1f} ms GPU-busy / {:.1f} ms step)  |  {} kernels/step @ ~{:.0f}us",
                     100 * number(p, "gpu_util"), number(p, "gpu_busy_ms_per_step"), step,
                     static_cast<long long>(number(p, "kernels_per_step")), number(p, "mean_kernel_us")));
    line(fmt::format("  peak VRAM {:.0f} MB  |  Tensor Cores {:.0f}% of GPU time  |  memcpy {:.1f} ms/step",
                     number(p, "peak_vram_mb"), number(p, "tensorcore_pct"), number(p, "memcpy_ms_per_step")));
  } else if (gpu) {
    line(fmt::format("  GPU util not measured: {}", text_of(p["gpu_trace"].value("reason", nlohmann::ordered_json()))));
    line(fmt::format("  peak VRAM {:.0f} MB", number(p, "peak_vram_mb")));
  } else if (p.value("cpu_util", nlohmann::ordered_json()).is_number()) {
    const bool synced = p.contains("window") && text(p["window"], "ops_window") == "synced";
    line(fmt::format("  CPU util {:.0f}%  ({:.1f} ms in operators / {:.1f} ms step{}, training thread)  |  {} ops/step",
                     100 * number(p, "cpu_util"), number(p, "cpu_busy_ms_per_step"), number(p, "cpu_window_step_ms", step),
                     synced ? " in the synchronised half" : "", whole(p["metrics"], "ops_per_step")));
  }
  if (gpu && p.value("host_syncs_per_step", nlohmann::ordered_json()).is_number()) {
    std::string ops;
    if (p.value("host_sync_ops", nlohmann::ordered_json()).is_object()) {
      for (const auto& [name, per_step] : p["host_sync_ops"].items()) {
        ops += fmt::format("{}{} {}", ops.empty() ? ": " : ", ", name, per_step.is_number() ? fmt::format("{:g}", per_step.get<double>()) : per_step.dump());
      }
    }
    line(fmt::format("  host syncs {:g}/step{}  (operators that make the host wait for the GPU)", number(p, "host_syncs_per_step"), ops));
  }
  if (p.contains("distributed") && p["distributed"].is_object()) {
    const auto& d = p["distributed"];
    if (d.contains("slowest_rank") && d["slowest_rank"].is_object() && d.contains("fastest_rank")) {
      line(fmt::format("  {} ranks: slowest rank {} ({:.1f} ms/step), fastest rank {} ({:.1f} ms/step), spread {:.1f}%",
                       whole(d, "world_size"), whole(d["slowest_rank"], "rank"), number(d["slowest_rank"], "step_ms"),
                       whole(d["fastest_rank"], "rank"), number(d["fastest_rank"], "step_ms"), number(d, "rank_spread_pct")));
    }
    if (d.contains("collective_ms_per_step") && d["collective_ms_per_step"].is_number()) {
      line(fmt::format("  collectives in flight {:.1f} ms/step ({:.0f}% of the step; {})", number(d, "collective_ms_per_step"),
                       100 * number(d, "collective_frac"), text(d, "collectives_from")));
    } else {
      line(fmt::format("  collectives: {}", text(d, "collectives_from", "not measured")));
    }
  }
  line(fmt::format("  >> VERDICT: {} — {}.", verdict_label(text(p, "bound")), text(p, "bound_why")));
  line(fmt::format("     Levers: {}.", text(p, "levers")));
  if (gpu && !p["categories"].empty()) {
    line("  GPU kernel mix:");
    for (const auto& c : p["categories"]) {
      line(fmt::format("    {:<18} {} {:5.1f}%  {:.2f} ms/step", text(c, "name"), bar(number(c, "pct")), number(c, "pct"),
                       number(c, "ms_per_step")));
    }
    top_rows("  top kernels (per step):", p["top_kernels"], "pct_of_gpu", "kernel");
  } else if (!p["ops"].empty()) {
    top_rows("  top operators (per step; nested operators count in their parents too):", p["ops"], "pct_of_cpu_ops", "op");
  }
  if (p.contains("composition_ms") && p["composition_ms"].is_object()) {
    std::string phases;
    for (const auto& [phase, ms] : p["composition_ms"].items()) {
      phases += fmt::format("{}{} {:.1f}ms", phases.empty() ? "" : " · ", phase, ms.is_number() ? ms.get<double>() : 0.0);
    }
    line("  per-phase wall (synced): " + phases);
  }
  if (p.contains("parts_ms") && p["parts_ms"].is_object() && !p["parts_ms"].empty()) {
    std::map<std::string, std::string> within;  // phase -> "part 1.0ms · ..."
    for (const auto& [name, ms] : p["parts_ms"].items()) {
      const auto slash = name.find('/');
      std::string& text = within[name.substr(0, slash)];
      text += fmt::format("{}{} {:.1f}ms", text.empty() ? "" : " · ", name.substr(slash + 1), ms.is_number() ? ms.get<double>() : 0.0);
    }
    for (const auto& [phase, text] : within) line(fmt::format("    within {}: {}", phase, text));
  }
  if (!timeline_path.empty()) line(fmt::format("  timeline:  {}      raw trace: {}  (load in Perfetto/Nsight if you want)", timeline_path, trace_path));
  line(rule);
  return out;
}

}  // namespace libreyolo::profile
