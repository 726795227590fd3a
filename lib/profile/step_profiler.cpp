#include "profile/step_profiler.h"

#include "core/log.h"
#include "cuda/cuda_info.h"
#include "profile/artifacts.h"

#include <ATen/ATen.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>

namespace libreyolo::profile {

namespace {

int round_up(int value, int multiple) { return multiple > 1 ? (value + multiple - 1) / multiple * multiple : value; }

std::int64_t allocator_calls(const c10::Device& device) {
  if (!device.is_cuda()) return 0;
  const auto stats = cuda::allocator_stats(device.index());
  return stats.device_allocations + stats.device_frees;
}

}  // namespace

StepProfiler::StepProfiler(ProfilerOptions options) : options_(std::move(options)) {
  options_.steps = std::max(2, options_.steps);
  const int accumulate = std::max(1, options_.accumulate);
  if (accumulate > 1) {
    const int warmup = round_up(options_.warmup, accumulate), steps = round_up(options_.steps, accumulate);
    if (warmup != options_.warmup || steps != options_.steps) {
      log::info("Profiler: window rounded to accumulation boundaries (warmup {} -> {}, steps {} -> {})", options_.warmup, warmup,
                options_.steps, steps);
    }
    options_.warmup = warmup, options_.steps = steps;
  }
  half_ = std::max(1, options_.steps / 2);
  pid_ = static_cast<std::int64_t>(::getpid());
  tid_ = current_thread_id();
  log::info("Profiler: {} warmup steps, then {} measured ({} unsynchronised, {} synchronised)", options_.warmup,
            options_.steps, half_, options_.steps - half_);
  set_step_part_listener(this);
}

StepProfiler::~StepProfiler() {
  if (step_part_listener() == this) set_step_part_listener(nullptr);
  if (kernels_) kernels_->stop();
  if (cpu_ops_) cpu_ops_->stop();
}

void StepProfiler::synchronize() const {
  if (options_.device.is_cuda()) cuda::synchronize(options_.device.index());
}

void StepProfiler::add_span(const std::string& name, double start_us, double end_us) {
  spans_.push_back({.name = name, .category = category::annotation, .start_us = start_us,
                    .duration_us = end_us - start_us, .pid = pid_, .tid = tid_});
}

void StepProfiler::start_window() {
  if (options_.device.is_cuda()) {
    synchronize();
    cuda::reset_allocator_peak(options_.device.index());
    allocator_calls_at_start_ = allocator_calls(options_.device);
  }
  if (!options_.trace) {
    trace_missing_reason_ = "profile_trace=false: no operator or kernel trace was collected";
    return;
  }
  if (options_.device.is_cuda()) {
    kernels_ = start_kernel_collector(options_.device.index(), trace_missing_reason_);
    if (!kernels_) log::warn("Profiler: no GPU kernel trace: {}", trace_missing_reason_);
  }
}

void StepProfiler::before_fetch() {
  if (finished_) return;
  if (step_index_ == options_.warmup && !window_started_) {
    window_started_ = true;
    start_window();
  }
  fetch_start_us_ = now_us();
  step_start_us_ = fetch_start_us_;
}

void StepProfiler::after_fetch(bool got_batch) {
  if (!active() || !got_batch) return;
  const double end = now_us();
  add_span("step/dataload", fetch_start_us_, end);
  if (!synced_half()) dataload_us_ += end - fetch_start_us_;
}

void StepProfiler::part_start(const char* name) {
  if (!active()) return;
  if (synced_half()) synchronize();
  open_parts_.emplace_back(fmt::format("{}/{}", current_phase_ ? current_phase_ : "unphased", name), now_us());
}

void StepProfiler::part_end(const char*) {
  if (open_parts_.empty()) return;  // opened before the window
  const bool synced = synced_half();
  if (synced) synchronize();
  const double end = now_us();
  const auto [name, start] = open_parts_.back();
  open_parts_.pop_back();
  add_span("step/" + name, start, end);
  if (synced) synced_us_[name] += end - start;
}

StepProfiler::Phase::Phase(StepProfiler* profiler, const char* name) : profiler_(profiler), name_(name) {
  if (!profiler_) return;
  profiler_->current_phase_ = name;
  if (profiler_->synced_half()) profiler_->synchronize();
  start_us_ = now_us();
}

StepProfiler::Phase::~Phase() {
  if (!profiler_) return;
  const bool synced = profiler_->synced_half();
  if (synced) profiler_->synchronize();
  const double end = now_us();
  profiler_->add_span(std::string("step/") + name_, start_us_, end);
  if (synced) profiler_->synced_us_[name_] += end - start_us_;
  profiler_->current_phase_ = nullptr;
}

bool StepProfiler::end_step() {
  if (finished_) return false;
  if (!active()) {
    ++step_index_;
    return false;
  }
  const double done = now_us();
  spans_.push_back({.name = "ProfilerStep#" + std::to_string(measured_ + 1), .category = category::annotation,
                    .start_us = step_start_us_, .duration_us = done - step_start_us_, .pid = pid_, .tid = tid_});
  if (!synced_half()) real_step_us_ += done - step_start_us_;
  ++measured_;
  ++step_index_;
  if (measured_ == half_) {
    if (options_.device.is_cuda()) {
      allocator_calls_per_step_ = static_cast<double>(allocator_calls(options_.device) - allocator_calls_at_start_) / half_;
    }
    // Operators are recorded in the synchronised half only: recording every operator costs about
    // a microsecond each, which would inflate the real (unsynchronised) step time it must not touch.
    if (options_.trace) cpu_ops_ = std::make_unique<CpuOpCollector>();
  }
  if (measured_ >= options_.steps) {
    finish();
    return true;
  }
  return false;
}

std::vector<RankTiming> StepProfiler::gather_rank_timings(const StepSummary& summary) const {
  const at::Tensor mine = at::tensor({static_cast<double>(options_.collectives->rank()), summary.step_ms, summary.dataload_ms},
                                     at::kDouble).view({1, 3});
  const at::Tensor all = options_.collectives->gather_rows(mine).contiguous();
  std::vector<RankTiming> ranks;
  const auto row = all.accessor<double, 2>();
  for (std::int64_t r = 0; r < all.size(0); ++r) {
    ranks.push_back({.rank = static_cast<int>(row[r][0]), .step_ms = row[r][1], .dataload_ms = row[r][2]});
  }
  return ranks;
}

void StepProfiler::finish() {
  finished_ = true;
  synchronize();
  StepSummary summary;
  summary.meta = options_.meta;
  summary.warmup = options_.warmup;
  summary.real_steps = half_;
  summary.synced_steps = options_.steps - half_;
  summary.step_ms = real_step_us_ / 1000.0 / half_;
  summary.dataload_ms = dataload_us_ / 1000.0 / half_;
  const int synced = std::max(1, options_.steps - half_);
  for (const auto& [phase, us] : synced_us_) summary.composition_ms[phase] = us / 1000.0 / synced;
  summary.device_kind = options_.device.is_cuda() ? "cuda" : "cpu";
  summary.allocator_calls_per_step = allocator_calls_per_step_;
  if (options_.device.is_cuda()) {
    summary.peak_vram_mb = static_cast<double>(cuda::allocator_stats(options_.device.index()).peak_allocated_bytes) / 1e6;
  }

  std::optional<Trace> trace;
  if (options_.trace) {
    trace.emplace();
    trace->events = std::move(spans_);
    if (cpu_ops_) {
      cpu_ops_->stop();
      auto ops = cpu_ops_->take_events();
      if (cpu_ops_->dropped()) log::warn("Profiler: {} CPU operator spans over the per-thread cap were not kept", cpu_ops_->dropped());
      trace->events.insert(trace->events.end(), std::make_move_iterator(ops.begin()), std::make_move_iterator(ops.end()));
    }
    trace->process_names[pid_] = "libreyolo (CPU)";
    trace->thread_names[{pid_, tid_}] = "training loop";
    if (kernels_) {
      KernelRecords records = kernels_->stop();
      kernels_.reset();
      if (records.dropped) log::warn("Profiler: CUPTI dropped {} activity records (buffers full)", records.dropped);
      if (records.invalid) log::info("Profiler: {} GPU records with zero or reversed timestamps were filtered out", records.invalid);
      for (const auto& e : records.events) {
        if (e.pid >= kGpuProcessBase) trace->process_names[e.pid] = "GPU " + std::to_string(e.pid - kGpuProcessBase);
      }
      trace->events.insert(trace->events.end(), std::make_move_iterator(records.events.begin()),
                           std::make_move_iterator(records.events.end()));
      trace->flows = std::move(records.flows);
    }
  }
  if (options_.collectives && options_.collectives->world_size() > 1) summary.ranks = gather_rank_timings(summary);
  if (!options_.write) {
    result_ = ProfileResult{};
    return;
  }
  summary.kernels_measured = options_.device.is_cuda() && trace && trace_missing_reason_.empty();
  summary.trace_missing_reason = trace_missing_reason_;
  summary.ops_in_synced_half = true;
  result_ = write_artifacts(options_.run_dir, summary, trace ? &*trace : nullptr, options_.quiet, options_.open);
}

}  // namespace libreyolo::profile
