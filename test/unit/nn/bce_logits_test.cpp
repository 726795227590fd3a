#include "nn/bce_logits.h"
#include "nn/bce_logits_kernel.h"
#include "nn/cpu_kernels.h"

#include <ATen/Version.h>
#include <torch/torch.h>

#include <cmath>
#include <vector>

#include "catch.h"  // last: see catch.h

using namespace libreyolo;

namespace {

// Logits over the whole range the kernel branches on (both signs, 0, saturated values far past
// exp's range) and targets as the assigner gives them: mostly 0, some 1, some IoU-weighted scores.
std::pair<torch::Tensor, torch::Tensor> inputs(std::int64_t n) {
  torch::Tensor x = torch::randn({n}) * 4;
  torch::Tensor t = torch::zeros({n});
  if (n > 8) {
    x.index_put_({torch::indexing::Slice(0, 8)}, torch::tensor({0.0f, -0.0f, 100.0f, -100.0f, 1e-3f, -1e-3f, 30.0f, -30.0f}));
    t.index_put_({torch::indexing::Slice(1, torch::indexing::None, 7)}, 1.0f);
    t.index_put_({torch::indexing::Slice(3, torch::indexing::None, 11)}, torch::rand({(n - 3 + 10) / 11}));
  }
  return {x, t};
}

// float64 references through ATen: the summed loss and its gradient in x
std::pair<double, torch::Tensor> reference(const torch::Tensor& x, const torch::Tensor& t) {
  const torch::Tensor x64 = x.to(torch::kDouble).requires_grad_(true);
  const torch::Tensor loss = torch::binary_cross_entropy_with_logits(x64, t.to(torch::kDouble), {}, {}, at::Reduction::Sum);
  loss.backward();
  return {loss.item<double>(), x64.grad()};
}

std::vector<std::pair<const char*, nn::kernels::BceLogitsKernels>> kernels_here() {
  std::vector<std::pair<const char*, nn::kernels::BceLogitsKernels>> kernels{{"DEFAULT", nn::kernels::DEFAULT::bce_logits_kernels()}};
#if defined(__x86_64__)
  for (const nn::CpuKernels k : nn::runnable_vectorised_cpu_kernels()) {
    kernels.emplace_back(nn::cpu_kernels_name(k), k == nn::CpuKernels::Avx2 ? nn::kernels::AVX2::bce_logits_kernels()
                                                                             : nn::kernels::AVX512::bce_logits_kernels());
  }
#endif
  return kernels;
}

}  // namespace

TEST_CASE("every compiled capability's BCE-with-logits kernels give the float64 sum and gradient", "[bce]") {
  torch::manual_seed(3);
  // 0 values; 5: the scalar tail alone; 1,000,003: several tasks and flushes, and a tail
  for (const std::int64_t n : {std::int64_t{0}, std::int64_t{5}, std::int64_t{1000003}}) {
    INFO("values " << n);
    const auto [x, t] = inputs(n);
    const auto [expected_sum, expected_grad] = n > 0 ? reference(x, t) : std::pair<double, torch::Tensor>{0.0, torch::zeros({0})};
    for (const auto& [name, kernel] : kernels_here()) {
      INFO(name);
      const double sum = kernel.sum(x.data_ptr<float>(), t.data_ptr<float>(), n);
      CHECK(std::abs(sum - expected_sum) <= 1e-6 * std::max(1.0, std::abs(expected_sum)));
      torch::Tensor grad = torch::full({n}, std::nanf(""));
      kernel.grad(x.data_ptr<float>(), t.data_ptr<float>(), n, -2.5f, grad.data_ptr<float>());
      if (n > 0) CHECK((grad.to(torch::kDouble) + 2.5 * expected_grad).abs().max().item<double>() < 2.5e-6);
    }
  }
}

TEST_CASE("bce_with_logits_sum: forward and backward equal ATen's, and what the kernel cannot take goes to ATen", "[bce]") {
  torch::manual_seed(4);
  const auto [x0, t] = inputs(4 * 300 * 13);
  const torch::Tensor logits = x0.view({4, 300, 13});
  const torch::Tensor targets = t.view({4, 300, 13});
  const auto aten = [](const torch::Tensor& x, const torch::Tensor& y) {
    return torch::binary_cross_entropy_with_logits(x, y, {}, {}, at::Reduction::None).sum();
  };
  SECTION("fused: loss, gradient scaled by the upstream one, twice with retain_graph") {
    REQUIRE(nn::fused_bce_applies(logits, targets));
    const torch::Tensor x = logits.clone().requires_grad_(true), xr = logits.clone().requires_grad_(true);
    const torch::Tensor loss = nn::bce_with_logits_sum(x, targets), expected = aten(xr, targets);
    REQUIRE(loss.dim() == 0);
    CHECK(loss.item<double>() == Approx(expected.item<double>()).epsilon(1e-6));
    (loss * 2.5).backward({}, /*retain_graph=*/true);
    (expected * 2.5).backward();
    CHECK((x.grad() - xr.grad()).abs().max().item<float>() < 1e-6f);
    (loss * -1.0).backward();  // again, from the saved inputs
    CHECK((x.grad() - 1.5 * xr.grad() / 2.5).abs().max().item<float>() < 1e-6f);
  }
  SECTION("under no_grad: the sum alone") {
    torch::NoGradGuard no_grad;
    const torch::Tensor loss = nn::bce_with_logits_sum(logits, targets);
    CHECK(!loss.requires_grad());
    CHECK(loss.item<double>() == Approx(aten(logits, targets).item<double>()).epsilon(1e-6));
  }
  SECTION("not contiguous, targets needing a gradient, float64: ATen's ops, both gradients") {
    const torch::Tensor strided = logits.transpose(1, 2), strided_targets = targets.transpose(1, 2);
    CHECK_FALSE(nn::fused_bce_applies(strided, strided_targets));
    const torch::Tensor wanting = targets.clone().requires_grad_(true);
    CHECK_FALSE(nn::fused_bce_applies(logits, wanting));
    CHECK_FALSE(nn::fused_bce_applies(logits.to(torch::kDouble), targets.to(torch::kDouble)));
    CHECK_FALSE(nn::fused_bce_applies(logits, targets.flatten()));
    const torch::Tensor x = logits.clone().requires_grad_(true);
    nn::bce_with_logits_sum(x, wanting).backward();
    const torch::Tensor xr = logits.clone().requires_grad_(true), tr = targets.clone().requires_grad_(true);
    aten(xr, tr).backward();
    CHECK((x.grad() - xr.grad()).abs().max().item<float>() < 1e-6f);
    CHECK((wanting.grad() - tr.grad()).abs().max().item<float>() < 1e-6f);
    CHECK(nn::bce_with_logits_sum(strided, strided_targets).item<double>() ==
          Approx(aten(strided, strided_targets).item<double>()).epsilon(1e-6));
  }
}
