#include "nn/bn_silu.h"
#include "nn/bn_silu_kernel.h"
#include "nn/conv.h"
#include "nn/cpu_kernels.h"

#include <ATen/Version.h>
#include <torch/torch.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "catch.h"  // last: see catch.h

using namespace libreyolo;

namespace {

torch::nn::BatchNorm2d make_bn(int channels, std::optional<double> momentum = 0.03) {
  torch::nn::BatchNorm2d bn(torch::nn::BatchNorm2dOptions(channels).eps(1e-3).momentum(momentum));
  torch::NoGradGuard no_grad;
  bn->weight.uniform_(0.5, 1.5);
  bn->bias.uniform_(-0.5, 0.5);
  bn->running_mean.uniform_(-0.1, 0.1);
  bn->running_var.uniform_(0.9, 1.1);
  return bn;
}

torch::nn::BatchNorm2d copy_of(const torch::nn::BatchNorm2d& bn) {
  auto copy = std::dynamic_pointer_cast<torch::nn::BatchNorm2dImpl>(bn->clone());
  return torch::nn::BatchNorm2d(copy);
}

double relative(const torch::Tensor& a, const torch::Tensor& b) {
  return ((a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max() / b.to(torch::kDouble).abs().max().clamp_min(1e-12)).item<double>();
}

struct Result {
  torch::Tensor z, dx, dweight, dbias;
};

// relu: the fused BatchNorm+ReLU (and relu after the reference's BatchNorm) in SiLU's place
Result run(torch::nn::BatchNorm2d& bn, const torch::Tensor& input, const torch::Tensor& dz, bool fused,
           at::MemoryFormat format = at::MemoryFormat::ChannelsLast, bool relu = false) {
  torch::Tensor x = input.detach().clone(format).requires_grad_(true);
  bn->zero_grad();
  torch::Tensor z;
  if (fused && relu) {
    REQUIRE(nn::fused_bn_relu_applies(x, *bn));
    z = nn::batch_norm_relu(x, *bn);
  } else if (fused) {
    REQUIRE(nn::fused_bn_silu_applies(x, *bn));
    z = nn::batch_norm_silu(x, *bn);
  } else {
    const torch::Tensor y = bn(x.to(torch::kFloat));  // the float reference, from the same input values
    z = relu ? torch::relu(y) : torch::silu(y);
  }
  z.backward(dz.to(z.scalar_type()));
  return {z.detach(), x.grad(), bn->weight.grad().clone(), bn->bias.grad().clone()};
}

// The fused float32 step against the float reference: output, input and parameter gradients.
void check_float32_match(const Result& fused, const Result& reference) {
  CHECK(relative(fused.z, reference.z) < 1e-5);
  CHECK(relative(fused.dx, reference.dx) < 1e-4);
  CHECK(relative(fused.dweight, reference.dweight) < 1e-4);
  CHECK(relative(fused.dbias, reference.dbias) < 1e-4);
}

// The AVX2 and AVX-512 kernels this CPU can run (the DEFAULT ones run everywhere).
std::vector<nn::kernels::BnSiluKernelSet> vectorised_kernel_sets() {
  std::vector<nn::kernels::BnSiluKernelSet> sets;
#if defined(__x86_64__)
  for (const nn::CpuKernels kernels : nn::runnable_vectorised_cpu_kernels()) {
    sets.push_back(kernels == nn::CpuKernels::Avx2 ? nn::kernels::AVX2::kernel_set() : nn::kernels::AVX512::kernel_set());
  }
#endif
  return sets;
}

}  // namespace

TEST_CASE("fused BatchNorm+SiLU equals BatchNorm2d then silu in float32: output, gradients, running statistics", "[bn_silu]") {
  // 24 and 40 channels: whole vectors and a tail for 8 and 16 lanes; 3 channels: the tail alone.
  // NCHW: planes of 63, 15 and 16 values (pairs of vectors, one, single values)
  for (const auto format : {at::MemoryFormat::ChannelsLast, at::MemoryFormat::Contiguous}) {
    for (const auto& sizes : std::vector<std::vector<std::int64_t>>{{4, 24, 7, 9}, {2, 40, 5, 3}, {3, 3, 4, 4}}) {
      DYNAMIC_SECTION((format == at::MemoryFormat::ChannelsLast ? "channels-last" : "NCHW")
                      << " shape " << sizes[0] << "x" << sizes[1] << "x" << sizes[2] << "x" << sizes[3]) {
        torch::manual_seed(3);
        const torch::Tensor x = torch::randn(sizes) * 2 + 0.7;
        const torch::Tensor dz = torch::randn(sizes);
        auto fused_bn = make_bn(static_cast<int>(sizes[1]));
        auto reference_bn = copy_of(fused_bn);
        for (int step = 0; step < 2; ++step) {  // twice: the running statistics move twice
          const Result fused = run(fused_bn, x * (1 + step), dz, true, format);
          const Result reference = run(reference_bn, x * (1 + step), dz, false, format);
          CHECK(fused.z.is_contiguous(format));
          CHECK(fused.dx.is_contiguous(format));
          check_float32_match(fused, reference);
        }
        CHECK(relative(fused_bn->running_mean, reference_bn->running_mean) < 1e-5);
        CHECK(relative(fused_bn->running_var, reference_bn->running_var) < 1e-5);
        CHECK(fused_bn->num_batches_tracked.item<std::int64_t>() == 2);
        CHECK(reference_bn->num_batches_tracked.item<std::int64_t>() == 2);
      }
    }
  }
}

TEST_CASE("fused BatchNorm+ReLU equals BatchNorm2d then relu in float32, channels-last only", "[bn_silu]") {
  for (const auto& sizes : std::vector<std::vector<std::int64_t>>{{4, 24, 7, 9}, {2, 40, 5, 3}, {3, 3, 4, 4}}) {
    DYNAMIC_SECTION("shape " << sizes[0] << "x" << sizes[1] << "x" << sizes[2] << "x" << sizes[3]) {
      torch::manual_seed(5);
      const torch::Tensor x = torch::randn(sizes) * 2 + 0.3;
      const torch::Tensor dz = torch::randn(sizes);
      auto fused_bn = make_bn(static_cast<int>(sizes[1]));
      auto reference_bn = copy_of(fused_bn);
      for (int step = 0; step < 2; ++step) {
        const Result fused = run(fused_bn, x * (1 + step), dz, true, at::MemoryFormat::ChannelsLast, true);
        const Result reference = run(reference_bn, x * (1 + step), dz, false, at::MemoryFormat::ChannelsLast, true);
        CHECK(fused.z.is_contiguous(at::MemoryFormat::ChannelsLast));
        CHECK((fused.z == 0).sum().item<std::int64_t>() > 0);  // the clamp is exercised
        check_float32_match(fused, reference);
      }
      CHECK(relative(fused_bn->running_mean, reference_bn->running_mean) < 1e-5);
      CHECK(relative(fused_bn->running_var, reference_bn->running_var) < 1e-5);
    }
  }
  auto bn = make_bn(8);
  // NCHW, and a one-pixel tensor (both layouts at once), keep ATen's ops: the classifiers' parity runs there
  CHECK_FALSE(nn::fused_bn_relu_applies(torch::randn({2, 8, 3, 3}), *bn));
  CHECK_FALSE(nn::fused_bn_relu_applies(torch::randn({4, 8, 1, 1}).contiguous(at::MemoryFormat::ChannelsLast), *bn));
  CHECK(nn::fused_bn_relu_applies(torch::randn({2, 8, 3, 3}).contiguous(at::MemoryFormat::ChannelsLast), *bn));
}

TEST_CASE("fused BatchNorm+SiLU in bfloat16 is the float computation rounded once", "[bn_silu]") {
  for (const auto format : {at::MemoryFormat::ChannelsLast, at::MemoryFormat::Contiguous}) {
    INFO((format == at::MemoryFormat::ChannelsLast ? "channels-last" : "NCHW"));
    torch::manual_seed(5);
    const std::vector<std::int64_t> sizes{4, 48, 6, 6};
    const torch::Tensor x = (torch::randn(sizes) * 3 - 1).to(torch::kBFloat16);
    const torch::Tensor dz = torch::randn(sizes).to(torch::kBFloat16);
    auto fused_bn = make_bn(48);
    auto reference_bn = copy_of(fused_bn);
    const Result fused = run(fused_bn, x, dz, true, format);
    const Result reference = run(reference_bn, x, dz, false, format);  // float32 from the same bfloat16 values
    CHECK(fused.z.scalar_type() == torch::kBFloat16);
    CHECK(fused.dx.scalar_type() == torch::kBFloat16);
    CHECK(fused.dx.is_contiguous(format));
    CHECK(fused.dweight.scalar_type() == torch::kFloat);
    // one rounding to bfloat16 (8 bits of mantissa: 2^-8 relative)
    CHECK(relative(fused.z, reference.z) < 8e-3);
    CHECK(relative(fused.dx, reference.dx) < 8e-3);
    CHECK(relative(fused.dweight, reference.dweight) < 1e-4);  // accumulated in float
    CHECK(relative(fused.dbias, reference.dbias) < 1e-4);
    CHECK(relative(fused_bn->running_var, reference_bn->running_var) < 1e-5);
  }
}

TEST_CASE("a gradient that is a channel slice of a wider channels-last tensor is read in place", "[bn_silu]") {
  const torch::Tensor wide = torch::randn({4, 40, 9, 10}).contiguous(at::MemoryFormat::ChannelsLast);
  CHECK(nn::channels_last_row_stride(wide) == 40);
  CHECK(nn::channels_last_row_stride(wide.narrow(1, 8, 24)) == 40);  // what cat's backward hands each input
  CHECK(nn::channels_last_row_stride(wide.contiguous()) == 0);       // NCHW
  CHECK(nn::channels_last_row_stride(wide.narrow(2, 0, 3)) == 0);    // rows no longer evenly spaced
  CHECK(nn::channels_last_row_stride(torch::randn({2, 24, 1, 1}).contiguous(at::MemoryFormat::ChannelsLast)) == 24);
  for (const auto dtype : {torch::kFloat, torch::kBFloat16}) {
    INFO(c10::toString(dtype));
    torch::manual_seed(19);
    const torch::Tensor x = torch::randn({4, 24, 9, 10}).to(dtype);  // 360 rows: several of the kernels' row tiles
    auto bn = make_bn(24);
    torch::Tensor dx[2], dw[2];
    for (int strided = 0; strided < 2; ++strided) {
      auto copy = copy_of(bn);
      torch::Tensor input = x.clone(at::MemoryFormat::ChannelsLast).requires_grad_(true);
      const torch::Tensor z = nn::batch_norm_silu(input, *copy);
      const torch::Tensor grad = wide.to(dtype).narrow(1, 8, 24);
      REQUIRE(nn::channels_last_row_stride(grad) == 40);
      z.backward(strided ? grad : grad.contiguous(at::MemoryFormat::ChannelsLast));
      dx[strided] = input.grad();
      dw[strided] = copy->weight.grad();
    }
    CHECK(torch::equal(dx[1], dx[0]));  // the same arithmetic on the same values
    CHECK(torch::equal(dw[1], dw[0]));
  }
}

TEST_CASE("NCHW: a gradient that is a channel slice of a wider NCHW tensor is read in place; others are copied", "[bn_silu]") {
  const torch::Tensor wide = torch::randn({4, 40, 9, 10});
  for (const auto dtype : {torch::kFloat, torch::kBFloat16}) {
    INFO(c10::toString(dtype));
    torch::manual_seed(23);
    const torch::Tensor x = torch::randn({4, 24, 9, 10}).to(dtype);
    auto bn = make_bn(24);
    const torch::Tensor slice = wide.to(dtype).narrow(1, 8, 24);  // planes 40 apart in each image
    // the slice, the same values contiguous, and channels-last (copied to NCHW first)
    const std::vector<torch::Tensor> grads{slice, slice.contiguous(), slice.contiguous(at::MemoryFormat::ChannelsLast)};
    std::vector<torch::Tensor> dx, dw;
    for (const auto& grad : grads) {
      auto copy = copy_of(bn);
      torch::Tensor input = x.clone().requires_grad_(true);
      const torch::Tensor z = nn::batch_norm_silu(input, *copy);
      CHECK(z.is_contiguous());
      z.backward(grad);
      dx.push_back(input.grad());
      dw.push_back(copy->weight.grad());
    }
    for (std::size_t i = 1; i < grads.size(); ++i) {
      CHECK(torch::equal(dx[i], dx[0]));  // the same arithmetic on the same values
      CHECK(torch::equal(dw[i], dw[0]));
    }
    // and only the input's gradient wanted: the parameters' gradients alone
    auto copy = copy_of(bn);
    const torch::Tensor z = nn::batch_norm_silu(x.clone(), *copy);
    z.backward(slice);
    CHECK(torch::equal(copy->weight.grad(), dw[0]));
  }
}

TEST_CASE("fused BatchNorm+SiLU gives exact zeros, not values near FLT_MIN, where sigmoid underflows", "[bn_silu]") {
  // Channels whose BN output sits near -88 (a large negative bias; trained networks have such
  // channels): sigmoid(y) is below FLT_MIN there, a denormal, and silu and its gradient are values
  // near FLT_MIN whose products in the next convolutions are denormals too. Each denormal costs the
  // CPU an assist: the trained yolo9-t's step ran 1.3x slower (measured with `profile=true` from a
  // trained checkpoint) until these became zeros. Far below (-120) both ATen and we give zeros.
  torch::manual_seed(11);
  const std::vector<std::int64_t> sizes{2, 32, 6, 6};
  const torch::Tensor x = torch::randn(sizes);
  const torch::Tensor dz = torch::randn(sizes);
  auto fused_bn = make_bn(32);
  {
    torch::NoGradGuard no_grad;
    fused_bn->weight.slice(0, 0, 16).fill_(0.05);
    fused_bn->bias.slice(0, 0, 16).fill_(-88.0);  // y = -88 ± 0.2: a whole vector of lanes
    fused_bn->bias.slice(0, 16, 24).fill_(-120.0);
  }
  auto reference_bn = copy_of(fused_bn);
  const Result fused = run(fused_bn, x, dz, true);
  const Result reference = run(reference_bn, x, dz, false);
  auto largest = [](const torch::Tensor& t, int from, int to) { return t.slice(1, from, to).abs().max().item<float>(); };
  CHECK(largest(reference.z, 0, 16) > 0.0f);  // what ATen gives: values near FLT_MIN
  CHECK(largest(reference.z, 0, 16) < 1e-35f);
  CHECK(largest(fused.z, 0, 16) == 0.0f);
  CHECK(largest(fused.dx, 0, 16) == 0.0f);
  CHECK(largest(reference.z, 16, 24) == 0.0f);
  CHECK(largest(fused.z, 16, 24) == 0.0f);
  CHECK(largest(fused.dx, 16, 24) == 0.0f);
  CHECK(relative(fused.z, reference.z) < 1e-5);
  CHECK(relative(fused.dx, reference.dx) < 1e-4);
  CHECK(relative(fused.dweight, reference.dweight) < 1e-4);
}

TEST_CASE("every compiled CPU capability's kernels agree with the plain ones", "[bn_silu]") {
  const auto plain = nn::kernels::DEFAULT::kernel_set();
  const std::vector<nn::kernels::BnSiluKernelSet> sets = vectorised_kernel_sets();
  INFO("in use: " << nn::bn_silu_capability() << ", ATen: " << at::get_cpu_capability());
  CHECK(nn::bn_silu_capability() == at::get_cpu_capability());
  // 37 rows: one of the kernels' row tiles; 301 rows of 21 channels: several, the last one partial,
  // and channels past the last whole vector
  for (const nn::kernels::BnSiluShape shape : {nn::kernels::BnSiluShape{37, 40}, nn::kernels::BnSiluShape{301, 21}}) {
    INFO("rows " << shape.rows << ", channels " << shape.channels);
    const torch::Tensor x = torch::randn({shape.rows, shape.channels});
    const torch::Tensor dz = torch::randn({shape.rows, shape.channels});
    const torch::Tensor scale = torch::rand({shape.channels}) + 0.5, shift = torch::randn({shape.channels});
    const torch::Tensor gamma = torch::rand({shape.channels}) + 0.5;
    auto outputs = [&](const nn::kernels::BnSiluKernelSet& set) {
      torch::Tensor mean = torch::empty({shape.channels}), variance = torch::empty({shape.channels});
      set.f32.stats(x.data_ptr<float>(), shape, mean.data_ptr<float>(), variance.data_ptr<float>());
      const torch::Tensor invstd = (variance + 1e-3).rsqrt();
      torch::Tensor z = torch::empty_like(x), dx = torch::empty_like(x);
      set.f32.apply(x.data_ptr<float>(), z.data_ptr<float>(), shape, scale.data_ptr<float>(), shift.data_ptr<float>());
      torch::Tensor sum_dy = torch::empty({shape.channels}), sum_dy_xhat = torch::empty({shape.channels});
      set.f32.reduce(x.data_ptr<float>(), dz.data_ptr<float>(), shape.channels, dx.data_ptr<float>(), shape, scale.data_ptr<float>(),
                     shift.data_ptr<float>(), mean.data_ptr<float>(), invstd.data_ptr<float>(), sum_dy.data_ptr<float>(),
                     sum_dy_xhat.data_ptr<float>());
      const torch::Tensor dy = dx.clone();
      set.f32.input_grad(x.data_ptr<float>(), dx.data_ptr<float>(), shape, mean.data_ptr<float>(), invstd.data_ptr<float>(),
                         gamma.data_ptr<float>(), sum_dy.data_ptr<float>(), sum_dy_xhat.data_ptr<float>());
      // ReLU in SiLU's place
      torch::Tensor z_relu = torch::empty_like(x), dy_relu = torch::empty_like(x);
      set.f32.apply_relu(x.data_ptr<float>(), z_relu.data_ptr<float>(), shape, scale.data_ptr<float>(), shift.data_ptr<float>());
      torch::Tensor sum_relu = torch::empty({shape.channels}), sum_xhat_relu = torch::empty({shape.channels});
      set.f32.reduce_relu(x.data_ptr<float>(), dz.data_ptr<float>(), shape.channels, dy_relu.data_ptr<float>(), shape,
                          scale.data_ptr<float>(), shift.data_ptr<float>(), mean.data_ptr<float>(), invstd.data_ptr<float>(),
                          sum_relu.data_ptr<float>(), sum_xhat_relu.data_ptr<float>());
      return std::vector<torch::Tensor>{mean, variance, z, sum_dy, sum_dy_xhat, dy, dx, z_relu, dy_relu, sum_relu, sum_xhat_relu};
    };
    const auto expected = outputs(plain);
    CHECK(relative(expected[0], x.mean(0)) < 1e-5);
    CHECK(relative(expected[1], x.var(0, /*unbiased=*/false)) < 1e-5);
    const torch::Tensor y = (x * scale + shift).requires_grad_(true);
    const torch::Tensor silu = torch::silu(y);
    CHECK(relative(expected[2], silu) < 1e-5);
    silu.backward(dz);
    CHECK(relative(expected[5], y.grad()) < 1e-5);  // dy = dz silu'(y)
    CHECK(relative(expected[3], y.grad().sum(0)) < 1e-4);
    const torch::Tensor y2 = (x * scale + shift).requires_grad_(true);
    const torch::Tensor relu = torch::relu(y2);
    CHECK(relative(expected[7], relu) < 1e-6);
    relu.backward(dz);
    CHECK(relative(expected[8], y2.grad()) < 1e-6);  // dy = dz where y > 0
    CHECK(relative(expected[9], y2.grad().sum(0)) < 1e-4);
    for (const auto& set : sets) {
      INFO(set.capability);
      const auto got = outputs(set);
      for (std::size_t i = 0; i < got.size(); ++i) CHECK(relative(got[i], expected[i]) < 1e-5);
    }
  }
}

TEST_CASE("every compiled CPU capability's NCHW kernels agree with the plain ones", "[bn_silu]") {
  std::vector<nn::kernels::BnSiluKernelSet> sets{nn::kernels::DEFAULT::kernel_set()};
  for (const auto& set : vectorised_kernel_sets()) sets.push_back(set);
  // planes of 37 values (pairs of vectors, one, single values for 8 and 16 lanes) and of 5 (single values only)
  for (const nn::kernels::BnSiluPlanes planes : {nn::kernels::BnSiluPlanes{3, 6, 37}, nn::kernels::BnSiluPlanes{2, 9, 5}}) {
    INFO("batch " << planes.batch << ", channels " << planes.channels << ", plane " << planes.plane);
    const std::int64_t C = planes.channels;
    const torch::Tensor x = torch::randn({planes.batch, C, planes.plane}) * 1.5 + 0.3;
    // dz: a channel slice of a wider tensor, planes C + 2 apart in each image
    const torch::Tensor dz = torch::randn({planes.batch, C + 2, planes.plane}).narrow(1, 1, C);
    const torch::Tensor gamma = torch::rand({C}) + 0.5, beta = torch::randn({C});
    const float eps = 1e-3f;
    auto outputs = [&](const nn::kernels::BnSiluKernelSet& set) {
      auto vec = [&] { return torch::empty({C}); };
      torch::Tensor mean = vec(), variance = vec(), invstd = vec(), scale = vec(), shift = vec();
      torch::Tensor z = torch::empty_like(x), dx = torch::empty_like(x), sum_dy = vec(), sum_dy_xhat = vec();
      set.f32.planar_forward(x.data_ptr<float>(), z.data_ptr<float>(), planes, gamma.data_ptr<float>(), beta.data_ptr<float>(), eps,
                             mean.data_ptr<float>(), variance.data_ptr<float>(), invstd.data_ptr<float>(), scale.data_ptr<float>(),
                             shift.data_ptr<float>());
      set.f32.planar_backward(x.data_ptr<float>(), dz.data_ptr<float>(), dz.stride(0), dz.stride(1), dx.data_ptr<float>(), planes,
                              scale.data_ptr<float>(), shift.data_ptr<float>(), mean.data_ptr<float>(), invstd.data_ptr<float>(),
                              gamma.data_ptr<float>(), sum_dy.data_ptr<float>(), sum_dy_xhat.data_ptr<float>());
      return std::vector<torch::Tensor>{mean, variance, invstd, scale, shift, z, sum_dy, sum_dy_xhat, dx};
    };
    const auto expected = outputs(sets.front());
    // against ATen: batch statistics, BN then SiLU and its gradients
    const torch::Tensor x4 = x.unsqueeze(3).requires_grad_(true);
    auto weight = gamma.clone().requires_grad_(true), bias = beta.clone().requires_grad_(true);
    const torch::Tensor reference = torch::silu(torch::batch_norm(x4, weight, bias, {}, {}, true, 0.1, eps, false));
    reference.backward(dz.unsqueeze(3));
    CHECK(relative(expected[0], x.mean(std::vector<std::int64_t>{0, 2})) < 1e-5);
    CHECK(relative(expected[1], x.var(std::vector<std::int64_t>{0, 2}, /*unbiased=*/false)) < 1e-5);
    CHECK(relative(expected[5], reference.squeeze(3)) < 1e-5);
    CHECK(relative(expected[6], bias.grad()) < 1e-4);
    CHECK(relative(expected[7], weight.grad()) < 1e-4);
    CHECK(relative(expected[8], x4.grad().squeeze(3)) < 1e-4);
    for (std::size_t s = 1; s < sets.size(); ++s) {
      INFO(sets[s].capability);
      const auto got = outputs(sets[s]);
      for (std::size_t i = 0; i < got.size(); ++i) CHECK(relative(got[i], expected[i]) < 1e-5);
    }
  }
}

TEST_CASE("the fusion applies to training-mode channels-last or NCHW float/bfloat16 only, and BaseConv uses it", "[bn_silu]") {
  auto bn = make_bn(8);
  const torch::Tensor x = torch::randn({2, 8, 4, 4});
  CHECK(nn::fused_bn_silu_applies(x, *bn));  // NCHW
  CHECK_FALSE(nn::fused_bn_silu_applies(torch::randn({2, 8, 4, 6}).narrow(3, 1, 4), *bn));  // neither layout
  const torch::Tensor cl = x.contiguous(at::MemoryFormat::ChannelsLast);
  CHECK(nn::fused_bn_silu_applies(cl, *bn));
  CHECK(nn::fused_bn_silu_applies(cl.to(torch::kBFloat16), *bn));
  CHECK_FALSE(nn::fused_bn_silu_applies(cl.to(torch::kDouble), *bn));
  CHECK_FALSE(nn::fused_bn_silu_applies(torch::randn({1, 8, 1, 1}).contiguous(at::MemoryFormat::ChannelsLast), *bn));  // one row
  bn->eval();
  CHECK_FALSE(nn::fused_bn_silu_applies(cl, *bn));

  // BaseConv in training mode: the fused path gives what its own modules give one after another
  for (const auto format : {at::MemoryFormat::ChannelsLast, at::MemoryFormat::Contiguous}) {
    INFO((format == at::MemoryFormat::ChannelsLast ? "channels-last" : "NCHW"));
    torch::manual_seed(7);
    nn::BaseConv block(3, 16, 3, 1);
    nn::BaseConv reference(3, 16, 3, 1);
    {
      torch::NoGradGuard no_grad;
      for (std::size_t i = 0; i < block->parameters().size(); ++i) reference->parameters()[i].copy_(block->parameters()[i]);
    }
    const torch::Tensor input = torch::randn({2, 3, 10, 10}).contiguous(format);
    const torch::Tensor fused = block->forward(input);
    CHECK(fused.is_contiguous(format));
    auto children = reference->named_children();
    auto& conv = *children["conv"]->as<torch::nn::Conv2dImpl>();
    auto& batch_norm = *children["bn"]->as<torch::nn::BatchNorm2dImpl>();
    const torch::Tensor conv_output = conv.forward(input);
    REQUIRE(nn::fused_bn_silu_applies(conv_output, batch_norm));  // so block->forward took the fused path
    const torch::Tensor unfused = torch::silu(batch_norm.forward(conv_output));
    CHECK(relative(fused, unfused) < 1e-5);
    CHECK(relative(block->named_buffers()["bn.running_var"], reference->named_buffers()["bn.running_var"]) < 1e-6);
  }
}

namespace {

// The fused forward's batch statistics of x (momentum 1: the running ones become the batch's), in
// both layouts, against double: the mean within 1e-4 standard deviations, the variance within 2e-6.
void check_statistics_against_double(const torch::Tensor& x) {
  const torch::Tensor x64 = x.to(torch::kDouble);
  const torch::Tensor mean64 = x64.mean({0, 2, 3});
  const torch::Tensor var64 = x64.var({0, 2, 3}, /*unbiased=*/false);
  const double rows = static_cast<double>(x.numel() / x.size(1));
  for (const auto format : {at::MemoryFormat::ChannelsLast, at::MemoryFormat::Contiguous}) {
    INFO((format == at::MemoryFormat::ChannelsLast ? "channels-last" : "NCHW"));
    auto bn = make_bn(static_cast<int>(x.size(1)), 1.0);
    torch::NoGradGuard no_grad;
    nn::batch_norm_silu(x.contiguous(format), *bn);
    CHECK(((bn->running_mean.to(torch::kDouble) - mean64).abs() / var64.sqrt()).max().item<double>() < 1e-4);
    CHECK(relative(bn->running_var.to(torch::kDouble) * (rows - 1) / rows, var64) < 2e-6);
  }
}

}  // namespace

TEST_CASE("the fused statistics of a large layer are as accurate as double sums", "[bn_silu]") {
  // 409,600 rows (batch 8 at 160x320): float totals over every row lost ~1e-5 of the variance of a
  // channel whose mean sits far from its first row; the kernels move their float sums to double
  // every few hundred rows. ATen's BatchNorm accumulates in double too.
  torch::manual_seed(29);
  check_statistics_against_double(
      (torch::randn({8, 16, 160, 320}) * 0.05 + torch::linspace(-3, 6, 16).view({1, 16, 1, 1})).contiguous(at::MemoryFormat::ChannelsLast));
}

TEST_CASE("the fused statistics stay exact when the first pixel is far from its channel's mean", "[bn_silu]") {
  // A corner pixel under zero padding, or the edge of a flat synthetic background, can sit hundreds
  // of standard deviations from a channel's mean: statistics shifted by the first row's value then
  // cancel (E[d²] - E[d]², d = x - x₀, both near (mean - x₀)²). The variance came out 1.2e-4
  // (channels-last) and 1.6e-5 (NCHW) off that way; shifted by a sampled mean, 3.8e-7 and 1.2e-7.
  torch::manual_seed(43);
  torch::Tensor x = torch::randn({8, 16, 24, 24}) * 0.01 + 1.0;
  x.select(2, 0).select(2, 0).fill_(5.0);  // every image's corner pixel: 400 standard deviations away
  check_statistics_against_double(x);
}

namespace {

// Two "ranks" in two threads of this process: each sums its tensor into a shared total, waits for
// the other, and takes the total (what an all-reduce gives).
class ThreadSum {
 public:
  void operator()(torch::Tensor& t) {
    std::unique_lock lock(mutex_);
    if (arrived_ == 0) total_ = t.clone(); else total_ += t;
    const int round = round_;
    if (++arrived_ == 2) {
      result_ = total_;
      arrived_ = 0;
      ++round_;
      ready_.notify_all();
    } else {
      ready_.wait(lock, [&] { return round_ != round; });
    }
    t.copy_(result_);
  }

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  torch::Tensor total_, result_;
  int arrived_ = 0, round_ = 0;
};

}  // namespace

TEST_CASE("sync_bn's fused kernels on two ranks give one process's BatchNorm+SiLU over both batches", "[bn_silu]") {
  torch::manual_seed(4);
  // a channel far from zero with a small spread (E[x²] - μ² cancels), and ordinary ones
  const torch::Tensor input = (torch::randn({6, 40, 20, 20}) * torch::linspace(0.05, 2.0, 40).view({1, -1, 1, 1}) +
                               torch::linspace(-3.0, 30.0, 40).view({1, -1, 1, 1}))
                                  .contiguous(at::MemoryFormat::ChannelsLast);
  const torch::Tensor dz = torch::randn_like(input).contiguous(at::MemoryFormat::ChannelsLast);
  torch::nn::BatchNorm2d reference = make_bn(40);
  // the float64 definition over the 6 images
  torch::nn::BatchNorm2d wide = copy_of(reference);
  wide->to(torch::kDouble);
  const torch::Tensor x64 = input.to(torch::kDouble).requires_grad_(true);
  const torch::Tensor z64 = torch::silu(wide(x64));
  z64.backward(dz.to(torch::kDouble));
  // one process, fused, 6 images
  torch::nn::BatchNorm2d single = copy_of(reference);
  const Result one = run(single, input, dz, /*fused=*/true);
  // two ranks of 3 images each, fused with the global statistics
  std::vector<torch::nn::BatchNorm2d> ranks{copy_of(reference), copy_of(reference)};
  ThreadSum sum;
  const nn::RankSum rank_sum = [&](torch::Tensor& t) { sum(t); };
  std::vector<Result> parts(2);
  const torch::Tensor probe = input.narrow(0, 0, 3).clone(at::MemoryFormat::ChannelsLast);
  REQUIRE(nn::fused_bn_silu_sync_applies(probe, *ranks[0]));  // (no assertion inside the threads: Catch2's are not thread-safe)
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      const torch::Tensor x = input.narrow(0, 3 * r, 3).clone(at::MemoryFormat::ChannelsLast).requires_grad_(true);
      const torch::Tensor z = nn::batch_norm_silu_synced(x, *ranks[r], rank_sum, r, 2);
      z.backward(dz.narrow(0, 3 * r, 3));
      parts[r] = {z.detach(), x.grad(), ranks[r]->weight.grad().clone(), ranks[r]->bias.grad().clone()};
    });
  }
  for (auto& t : threads) t.join();
  const torch::Tensor z2 = torch::cat({parts[0].z, parts[1].z}), dx2 = torch::cat({parts[0].dx, parts[1].dx});
  const torch::Tensor dweight2 = parts[0].dweight + parts[1].dweight, dbias2 = parts[0].dbias + parts[1].dbias;
  const double limit = 2e-6;  // float rounding against the float64 definition, as one process's fused kernels
  INFO("one process: z " << relative(one.z, z64) << ", dx " << relative(one.dx, x64.grad()) << "; two ranks: z "
                         << relative(z2, z64) << ", dx " << relative(dx2, x64.grad()) << ", dweight "
                         << relative(dweight2, wide->weight.grad()) << ", dbias " << relative(dbias2, wide->bias.grad()));
  CHECK(relative(z2, z64) < limit);
  CHECK(relative(dx2, x64.grad()) < limit);
  CHECK(relative(dweight2, wide->weight.grad()) < limit);
  CHECK(relative(dbias2, wide->bias.grad()) < limit);
  for (int r = 0; r < 2; ++r) {  // the same running statistics on every rank, one process's
    CHECK(relative(ranks[r]->running_mean, single->running_mean) < limit);
    CHECK(relative(ranks[r]->running_var, single->running_var) < limit);
  }
  CHECK(relative(one.z, z64) < limit);
  CHECK(relative(one.dx, x64.grad()) < limit);
}
