#include "train/host_reads.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <mutex>
#include <vector>

namespace libreyolo::train {

struct HostReadWatch::Seen {
  std::mutex mutex;
  std::map<std::string, std::int64_t> counts;
};

namespace {

// The watches alive now. A callback function cannot carry its watch, so every live watch hears
// every thread that has one registered: two watches at once on two threads would share their
// findings (the trainer captures on one thread at a time).
std::mutex registry_mutex;
std::vector<std::shared_ptr<HostReadWatch::Seen>> registry;

std::unique_ptr<at::ObserverContext> on_operator(const at::RecordFunction& function) {
  const char* name = function.name();
  if (name == nullptr || !is_host_read_operator(name)) return nullptr;
  const std::lock_guard lock(registry_mutex);
  for (const auto& seen : registry) {
    const std::lock_guard seen_lock(seen->mutex);
    ++seen->counts[name];
  }
  return nullptr;
}

}  // namespace

bool is_host_read_operator(std::string_view name) {
  static constexpr std::array<std::string_view, 11> kNames{
      "aten::_local_scalar_dense",  // item(), a Scalar from a tensor
      "aten::is_nonzero",           // a tensor as a bool
      "aten::equal",
      "aten::nonzero",  // boolean-mask index and index_put_ call it too
      "aten::masked_select",
      "aten::_unique",
      "aten::_unique2",
      "aten::unique_dim",
      "aten::unique_consecutive",
      "aten::unique_dim_consecutive",
      "aten::bincount",
  };
  return std::find(kNames.begin(), kNames.end(), name) != kNames.end();
}

HostReadWatch::HostReadWatch() : seen_(std::make_shared<Seen>()) {
  {
    const std::lock_guard lock(registry_mutex);
    registry.push_back(seen_);
  }
  handle_ = at::addThreadLocalCallback(at::RecordFunctionCallback(on_operator).scopes({at::RecordScope::FUNCTION}));
}

HostReadWatch::~HostReadWatch() {
  at::removeCallback(handle_);
  const std::lock_guard lock(registry_mutex);
  registry.erase(std::find(registry.begin(), registry.end(), seen_));
}

bool HostReadWatch::empty() const {
  const std::lock_guard lock(seen_->mutex);
  return seen_->counts.empty();
}

std::string HostReadWatch::summary() const {
  const std::lock_guard lock(seen_->mutex);
  std::string out;
  for (const auto& [name, count] : seen_->counts) out += fmt::format("{}{} x{}", out.empty() ? "" : ", ", name, count);
  return out;
}

}  // namespace libreyolo::train
