#include "train/amp.h"

#include "train/capturable_optimizer.h"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace libreyolo::train {

AutocastGuard::AutocastGuard(c10::DeviceType device, c10::ScalarType dtype, bool enabled, bool cache)
    : device_(device), enabled_(enabled) {
  if (!enabled_) return;
  was_caching_ = at::autocast::is_autocast_cache_enabled();
  at::autocast::set_autocast_cache_enabled(cache);
  was_enabled_ = at::autocast::is_autocast_enabled(device_);
  previous_dtype_ = at::autocast::get_autocast_dtype(device_);
  at::autocast::set_autocast_enabled(device_, true);
  at::autocast::set_autocast_dtype(device_, dtype);
}

AutocastGuard::~AutocastGuard() {
  if (!enabled_) return;
  at::autocast::set_autocast_enabled(device_, was_enabled_);
  at::autocast::set_autocast_dtype(device_, previous_dtype_);
  at::autocast::clear_cache();
  at::autocast::set_autocast_cache_enabled(was_caching_);
}

namespace {

// The first "flags" line of /proc/cpuinfo, read once (LibTorch 2.11 exposes no bf16 query for
// the CPU; the kernel's flags say it).
const std::set<std::string>& cpu_flags() {
  static const std::set<std::string> flags = [] {
    std::set<std::string> found;
    std::ifstream cpuinfo("/proc/cpuinfo");
    std::string line;
    while (std::getline(cpuinfo, line)) {
      if (line.rfind("flags", 0) != 0) continue;
      std::istringstream words(line);
      for (std::string flag; words >> flag;) found.insert(flag);
      break;
    }
    return found;
  }();
  return flags;
}

}  // namespace

bool cpu_has_bf16() { return cpu_flags().contains("avx512_bf16") || cpu_has_amx(); }
bool cpu_has_amx() { return cpu_flags().contains("amx_bf16"); }

double measure_cpu_bf16_speedup() {
  at::NoGradGuard no_grad;  // the backward runs as convolution_backward itself: no autograd graph
  struct Case {
    at::Tensor input, weight;
    std::vector<double> seconds;
  };
  std::vector<Case> cases;
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    const auto options = at::TensorOptions().dtype(dtype);
    cases.push_back({at::randn({8, 64, 40, 40}).to(options).contiguous(at::MemoryFormat::ChannelsLast),
                     (at::randn({64, 64, 3, 3}) * 0.05).to(options).contiguous(at::MemoryFormat::ChannelsLast), {}});
  }
  for (int round = 0; round < 6; ++round) {  // interleaved, so that a busy moment hits both; round 0 builds the kernels
    for (Case& c : cases) {
      const auto start = std::chrono::steady_clock::now();
      const at::Tensor output = at::conv2d(c.input, c.weight, {}, 1, 1);
      (void)at::convolution_backward(at::ones_like(output), c.input, c.weight, std::nullopt, {1, 1}, {1, 1}, {1, 1}, false,
                                     {0, 0}, 1, {true, true, false});
      if (round > 0) c.seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
  }
  for (Case& c : cases) std::sort(c.seconds.begin(), c.seconds.end());
  const auto median = [](const Case& c) { return c.seconds[c.seconds.size() / 2]; };
  const double float32 = median(cases[0]), bfloat16 = median(cases[1]);
  return bfloat16 > 0 ? float32 / bfloat16 : 0.0;
}

CpuBf16Note cpu_bf16_note(double speedup, bool amx) {
  const std::string measured = fmt::format("a bfloat16 convolution ran {:.2f}x as fast as float32 on this CPU{}", speedup,
                                           amx ? "" : " (no AMX)");
  constexpr std::string_view kUsing = "Using CPU mixed precision (autocast bfloat16)";
  if (speedup < 0.9) return {true, fmt::format("{}, but {}: amp=false trains faster here", kUsing, measured)};
  if (speedup < 1.1) return {false, fmt::format("{}: {}; little to gain here", kUsing, measured)};
  return {false, fmt::format("{}: {}", kUsing, measured)};
}

GradScaler::GradScaler(bool enabled, double init_scale, double growth_factor, double backoff_factor,
                       std::int64_t growth_interval)
    : enabled_(enabled),
      init_scale_(init_scale),
      growth_factor_(growth_factor),
      backoff_factor_(backoff_factor),
      growth_interval_(growth_interval) {}

void GradScaler::ensure_scale(const at::Device& device) {
  if (scale_.defined()) return;
  const auto options = at::TensorOptions().dtype(at::kFloat).device(device);
  scale_ = at::full({}, pending_state_ ? pending_state_->scale : init_scale_, options);
  growth_tracker_ = at::full({}, pending_state_ ? pending_state_->growth_tracker : 0, options.dtype(at::kInt));
  found_inf_ = at::zeros({}, options);
  pending_state_.reset();
}

at::Tensor GradScaler::scale(const at::Tensor& loss) {
  if (!enabled_) return loss;
  ensure_scale(loss.device());
  return loss * scale_.to(loss.scalar_type());
}

void GradScaler::unscale(torch::optim::Optimizer& optimizer) {
  if (!enabled_ || unscaled_) return;
  ensure_scale(at::kCPU);
  found_inf_.zero_();
  std::vector<at::Tensor> grads;
  for (auto& group : optimizer.param_groups()) {
    for (auto& p : group.params()) {
      if (p.grad().defined()) grads.push_back(p.grad());
    }
  }
  if (!grads.empty()) {
    const at::Tensor inverse = scale_.to(at::kDouble).reciprocal().to(at::kFloat);
    at::_amp_foreach_non_finite_check_and_unscale_(grads, found_inf_, inverse);
  }
  unscaled_ = true;
}

at::Tensor GradScaler::step(torch::optim::Optimizer& optimizer, bool stage) {
  if (auto* capturable = dynamic_cast<CapturableOptimizer*>(&optimizer)) {
    if (stage) capturable->stage();
    if (!enabled_) {
      capturable->apply({});
      return at::ones({}, at::kBool);
    }
    unscale(optimizer);
    capturable->apply(found_inf_);  // a step with overflowed gradients is masked on the device
    return found_inf_.eq(0);
  }
  if (!enabled_) {
    optimizer.step();
    return at::ones({}, at::kBool);
  }
  unscale(optimizer);
  const bool finite = found_inf_.item<float>() == 0.0f;  // one sync per optimizer step, as PyTorch's
  if (finite) optimizer.step();
  return at::scalar_tensor(finite, at::kBool);
}

void GradScaler::update() {
  if (!enabled_) return;
  ensure_scale(at::kCPU);
  at::_amp_update_scale_(scale_, growth_tracker_, found_inf_, growth_factor_, backoff_factor_, growth_interval_);
  unscaled_ = false;
}

double GradScaler::current_scale() const {
  if (!enabled_) return 1.0;
  return scale_.defined() ? scale_.item<double>() : (pending_state_ ? pending_state_->scale : init_scale_);
}

GradScalerState GradScaler::state() const {
  if (!scale_.defined()) return pending_state_.value_or(GradScalerState{init_scale_, 0});
  return {scale_.item<double>(), growth_tracker_.item<std::int64_t>()};
}

void GradScaler::load_state(const GradScalerState& state) {
  if (scale_.defined()) {
    scale_.fill_(state.scale);
    growth_tracker_.fill_(state.growth_tracker);
  } else {
    pending_state_ = state;
  }
}

}  // namespace libreyolo::train
