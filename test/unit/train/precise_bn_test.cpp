// precise_bn: the running statistics become the pooled moments of the images seen, frozen
// layers keep theirs, and modes and momentums come back.
#include "train/precise_bn.h"

#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <ATen/ATen.h>

#include "catch.h"  // last: see catch.h

using namespace libreyolo;

TEST_CASE("Precise BN pools the moments of the batches it sees", "[precise_bn]") {
  torch::nn::Sequential net(torch::nn::BatchNorm2d(3), torch::nn::BatchNorm2d(3));
  auto first = net->ptr(0), second = net->ptr(1);
  auto* frozen_bn = dynamic_cast<torch::nn::BatchNorm2dImpl*>(second.get());
  frozen_bn->running_mean.fill_(7.0);
  net->eval();
  // three batches of 2, 2 and 3 images (the last trimmed to 2: 6 images asked for)
  std::vector<at::Tensor> batches{at::randn({2, 3, 40, 40}) * 2 + 1, at::randn({2, 3, 40, 40}) + 3, at::randn({3, 3, 40, 40}) - 1};
  std::size_t next = 0;
  const auto used = train::recompute_batch_norm(
      {{net.ptr().get(), [&](const at::Tensor& x) { net->forward(x); }, {second}}},
      [&]() -> std::optional<at::Tensor> { return next < batches.size() ? std::optional(batches[next++]) : std::nullopt; }, 6);
  CHECK(used == 6);
  const at::Tensor all = at::cat({batches[0], batches[1], batches[2].slice(0, 0, 2)});
  const at::Tensor mean = all.mean({0, 2, 3}), var = all.var({0, 2, 3}, /*unbiased=*/true);
  auto* bn = dynamic_cast<torch::nn::BatchNorm2dImpl*>(first.get());
  CHECK(at::allclose(bn->running_mean, mean, 1e-4, 1e-5));
  CHECK(at::allclose(bn->running_var, var, 1e-3, 1e-4));  // up to the per-batch (n-1)/n factor
  CHECK(at::allclose(frozen_bn->running_mean, at::full({3}, 7.0)));  // excluded: untouched
  CHECK_FALSE(net->is_training());                                   // modes restored
  CHECK_FALSE(bn->is_training());
  CHECK(bn->options.momentum() == 0.1);
  CHECK(bn->num_batches_tracked.item<std::int64_t>() == 0);
}
