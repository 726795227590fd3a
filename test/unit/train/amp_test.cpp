#include "train/amp.h"

#include <ATen/autocast_mode.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>

#include "catch.h"  // last: see catch.h

using namespace libreyolo::train;

namespace {

struct OneParameter {
  at::Tensor w = torch::ones({2}, torch::requires_grad());
  torch::optim::SGD sgd{std::vector<at::Tensor>{w}, torch::optim::SGDOptions(0.1)};
  void set_grad(float a, float b) { w.mutable_grad() = torch::tensor({a, b}); }
};

}  // namespace

TEST_CASE("GradScaler unscales gradients, steps on finite ones and grows after the interval", "[amp]") {
  OneParameter p;
  GradScaler scaler(true, /*init_scale=*/8.0, /*growth=*/2.0, /*backoff=*/0.5, /*interval=*/2);
  CHECK(scaler.scale(torch::tensor(1.5f)).item<float>() == 12.0f);
  p.set_grad(8.0f, 16.0f);  // as if the loss had been scaled by 8
  CHECK(scaler.step(p.sgd).item<bool>());
  CHECK(at::allclose(p.w.grad(), torch::tensor({1.0f, 2.0f})));    // unscaled in place
  CHECK(at::allclose(p.w.detach(), torch::tensor({0.9f, 0.8f})));  // the step used the true gradient
  scaler.update();
  CHECK(scaler.current_scale() == 8.0);  // one clean step of two
  p.set_grad(8.0f, 8.0f);
  CHECK(scaler.step(p.sgd).item<bool>());
  scaler.update();
  CHECK(scaler.current_scale() == 16.0);  // grown after two clean steps
  CHECK(scaler.state().growth_tracker == 0);
}

TEST_CASE("GradScaler skips the step and backs off on inf or NaN gradients", "[amp]") {
  for (const float bad : {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    OneParameter p;
    GradScaler scaler(true, 8.0, 2.0, 0.5, 2);
    p.set_grad(1.0f, bad);
    CHECK_FALSE(scaler.step(p.sgd).item<bool>());
    CHECK(at::allclose(p.w.detach(), torch::ones({2})));  // untouched
    scaler.update();
    CHECK(scaler.current_scale() == 4.0);
    CHECK(scaler.state().growth_tracker == 0);
  }
}

TEST_CASE("GradScaler state round-trips and a disabled scaler is the identity", "[amp]") {
  GradScaler scaler(true);
  scaler.load_state({1024.0, 7});
  CHECK(scaler.current_scale() == 1024.0);
  CHECK(scaler.state().growth_tracker == 7);
  GradScaler off(false);
  OneParameter p;
  CHECK(off.scale(torch::tensor(3.0f)).item<float>() == 3.0f);
  p.set_grad(1.0f, 1.0f);
  CHECK(off.step(p.sgd).item<bool>());
  CHECK(off.current_scale() == 1.0);
}

TEST_CASE("Autocast guard turns CPU autocast on for its scope only", "[amp]") {
  {
    AutocastGuard guard(c10::kCPU, c10::kBFloat16, true);
    CHECK(at::autocast::is_autocast_enabled(c10::kCPU));
    const auto y = torch::mm(torch::ones({2, 2}), torch::ones({2, 2}));
    CHECK(y.scalar_type() == c10::kBFloat16);
  }
  CHECK_FALSE(at::autocast::is_autocast_enabled(c10::kCPU));
  AutocastGuard off(c10::kCPU, c10::kBFloat16, false);
  CHECK_FALSE(at::autocast::is_autocast_enabled(c10::kCPU));
}

TEST_CASE("The CPU's bfloat16 note follows the measured convolution speed-up", "[amp]") {
  const CpuBf16Note slower = cpu_bf16_note(0.66, false);
  CHECK(slower.warn);
  CHECK(slower.line.find("Using CPU mixed precision (autocast bfloat16)") == 0);
  CHECK(slower.line.find("0.66x as fast as float32 on this CPU (no AMX)") != std::string::npos);
  CHECK(slower.line.find("amp=false trains faster here") != std::string::npos);
  const CpuBf16Note even = cpu_bf16_note(1.0, false);
  CHECK_FALSE(even.warn);
  CHECK(even.line.find("little to gain") != std::string::npos);
  const CpuBf16Note faster = cpu_bf16_note(1.7, true);
  CHECK_FALSE(faster.warn);
  CHECK(faster.line == "Using CPU mixed precision (autocast bfloat16): a bfloat16 convolution ran 1.70x as fast as "
                       "float32 on this CPU");
}

TEST_CASE("The CPU's bfloat16 convolution speed-up is measured, not assumed", "[amp]") {
  const double speedup = measure_cpu_bf16_speedup();
  // Any CPU runs a bfloat16 convolution (emulated where it lacks the instructions): a real ratio,
  // within a range no CPU leaves (AMX is about 7x).
  CHECK(std::isfinite(speedup));
  CHECK(speedup > 0.01);
  CHECK(speedup < 50);
}
