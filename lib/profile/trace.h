// The profiler's event model and its file format: Chrome trace events ("traceEvents"), the
// format torch.profiler exports and Perfetto opens. We read our own traces and PyTorch's.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace libreyolo::profile {

// Category names as torch.profiler writes them.
namespace category {
inline constexpr const char* cpu_op = "cpu_op";
inline constexpr const char* annotation = "user_annotation";  // step/<phase> spans, ProfilerStep#N
inline constexpr const char* kernel = "kernel";
inline constexpr const char* memcpy = "gpu_memcpy";
inline constexpr const char* memset = "gpu_memset";
inline constexpr const char* runtime = "cuda_runtime";  // cudaLaunchKernel, cudaMalloc, ...
}  // namespace category

// GPU events use this plus the device index as their process id (never a real pid).
inline constexpr std::int64_t kGpuProcessBase = 1'000'000;

// One complete event ("ph": "X"). Times in microseconds on one clock.
struct Event {
  std::string name;
  std::string category;
  double start_us = 0;
  double duration_us = 0;
  std::int64_t pid = 0;
  std::int64_t tid = 0;
  std::int64_t correlation = -1;  // links a CUDA launch on the CPU to the kernel it started
  double end_us() const { return start_us + duration_us; }
};

// A CPU -> GPU arrow (torch's "ac2g" flow pair), drawn from a launch to its kernel.
struct Flow {
  std::int64_t id = 0;
  double from_us = 0, to_us = 0;
  std::int64_t from_pid = 0, from_tid = 0, to_pid = 0, to_tid = 0;
};

struct Trace {
  std::vector<Event> events;
  std::vector<Flow> flows;
  std::map<std::int64_t, std::string> process_names;
  std::map<std::pair<std::int64_t, std::int64_t>, std::string> thread_names;
};

// A profile or trace file's text, and its JSON: UsageError naming the file when it is missing
// or not JSON.
std::string read_file_text(const std::filesystem::path& path);
template <typename Json>
Json parse_json_text(const std::string& text, const std::filesystem::path& source);

// Each CUDA launch on the CPU (a runtime event) by its correlation id.
std::unordered_map<std::int64_t, const Event*> launches_by_correlation(const std::vector<Event>& events);

// Reads a Chrome trace (object with "traceEvents" or a bare event array). Throws UsageError
// naming the file when it is missing or not a trace.
Trace read_trace(const std::filesystem::path& path);
Trace parse_trace(const nlohmann::json& document, const std::string& source_name);

nlohmann::json trace_to_json(const Trace& trace);
void write_trace(const std::filesystem::path& path, const Trace& trace);  // atomic

// "ProfilerStep#12" -> 12; -1 for any other name.
std::int64_t profiler_step_number(const std::string& name);
// "step/forward" -> "forward"; empty for any other name.
std::string phase_of_annotation(const std::string& name);

}  // namespace libreyolo::profile
