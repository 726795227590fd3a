#include "profile/cpu_op_collector.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>

namespace libreyolo::profile {

namespace {

std::atomic<CpuOpCollector*> active_collector{nullptr};

struct StartTime : at::ObserverContext {
  double start_us = 0;
};

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction&) {
  auto context = std::make_unique<StartTime>();
  context->start_us = now_us();
  return context;
}

void on_end(const at::RecordFunction& function, at::ObserverContext* context) {
  CpuOpCollector* collector = active_collector.load(std::memory_order_acquire);
  if (!collector || !context) return;
  const double start = static_cast<StartTime*>(context)->start_us;
  static const std::int64_t pid = static_cast<std::int64_t>(::getpid());
  collector->add({.name = function.name(), .category = category::cpu_op, .start_us = start,
                  .duration_us = now_us() - start, .pid = pid, .tid = current_thread_id()});
}

}  // namespace

double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::int64_t current_thread_id() {
  static thread_local const std::int64_t id = static_cast<std::int64_t>(::syscall(SYS_gettid));
  return id;
}

CpuOpCollector::CpuOpCollector() {
  events_.reserve(1 << 16);
  active_collector.store(this, std::memory_order_release);
  handle_ = at::addGlobalCallback(at::RecordFunctionCallback(&on_start, &on_end)
                                      .needsInputs(false)
                                      .needsOutputs(false)
                                      .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
  running_ = true;
}

CpuOpCollector::~CpuOpCollector() { stop(); }

void CpuOpCollector::stop() {
  if (!running_) return;
  at::removeCallback(handle_);
  active_collector.store(nullptr, std::memory_order_release);
  running_ = false;
}

void CpuOpCollector::add(Event event) {
  const std::lock_guard lock(mutex_);
  events_.push_back(std::move(event));
}

std::vector<Event> CpuOpCollector::take_events() {
  const std::lock_guard lock(mutex_);
  return std::move(events_);
}

}  // namespace libreyolo::profile
