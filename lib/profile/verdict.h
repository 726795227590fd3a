// The verdict: what bounds the training step, why, and which levers move it. LibreYOLO's rule
// on a GPU (memory-pressure -> dataloader -> compute -> host / launch), a documented CPU analogue,
// and no verdict drawn from data that was not measured.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace libreyolo::profile {

struct VerdictInputs {
  bool on_gpu = true;
  // False when the busy time was not measured: no GPU kernel trace (CUPTI refused, another
  // subscriber, ...) or, on the CPU, no operator trace (profile_trace=false).
  bool busy_measured = true;
  std::string busy_missing_reason;
  // Share of the step spent waiting for the next batch; unset when only a trace was given.
  std::optional<double> dataload_fraction;
  // GPU: kernel busy time / step time, unclamped. CPU: operator busy time on the training thread / step time.
  double utilisation_raw = 0;
  std::optional<double> allocator_calls_per_step;  // device mallocs + frees (GPU)
  std::int64_t kernels_per_step = 0;
  double mean_kernel_us = 0;
  // GPU: operators per step that make the host wait for the device (train/host_reads.h) and what
  // they were ("aten::nonzero 2/step"); unset without an operator trace.
  std::optional<double> host_syncs_per_step;
  std::string host_syncs;
  double host_overhead_ms = 0;
  bool amp = true;
  // CPU: float32's time over bfloat16's for a convolution, measured by the run (unset: not measured)
  std::optional<double> cpu_bf16_speedup;
  // Data-parallel: the share of the step with a collective in flight (Gloo operators on the CPU,
  // NCCL kernels on the GPU); unset for one process or without a trace.
  std::optional<double> communication_fraction;
  std::string slowest_rank_note;  // "rank 1 is the slowest ..." when the ranks' steps differ
};

struct Verdict {
  std::string bound;  // "memory-pressure", "dataloader", "communication", "compute", "host / launch", or "unknown"
  std::string why;
  std::string levers;
};

inline constexpr double kDataloaderShare = 0.2;
inline constexpr double kCommunicationShare = 0.3;
inline constexpr double kComputeUtilisation = 0.8;
inline constexpr double kAllocatorCallsPerStep = 5;
inline constexpr double kOverSubscribedUtilisation = 1.05;

Verdict decide_verdict(const VerdictInputs& inputs);

// Console label: DATALOADER-BOUND, COMMUNICATION-BOUND, HOST/LAUNCH-BOUND, COMPUTE-BOUND, MEMORY-PRESSURE, NO VERDICT.
std::string verdict_label(const std::string& bound);

}  // namespace libreyolo::profile
