#include "nn/bn_silu.h"
#include "nn/bn_silu_kernel.h"
#include "nn/conv.h"
#include "nn/gelan.h"

#include <ATen/Version.h>
#include <torch/torch.h>

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

Result run(torch::nn::BatchNorm2d& bn, const torch::Tensor& input, const torch::Tensor& dz, bool fused) {
  torch::Tensor x = input.detach().clone(at::MemoryFormat::ChannelsLast).requires_grad_(true);
  bn->zero_grad();
  torch::Tensor z;
  if (fused) {
    REQUIRE(nn::fused_bn_silu_applies(x, *bn));
    z = nn::batch_norm_silu(x, *bn);
  } else {
    z = torch::silu(bn(x.to(torch::kFloat)));  // the float reference, from the same input values
  }
  z.backward(dz.to(z.scalar_type()));
  return {z.detach(), x.grad(), bn->weight.grad().clone(), bn->bias.grad().clone()};
}

}  // namespace

TEST_CASE("fused BatchNorm+SiLU equals BatchNorm2d then silu in float32: output, gradients, running statistics", "[bn_silu]") {
  // 24 and 40 channels: whole vectors and a tail for 8 and 16 lanes; 3 channels: the tail alone
  for (const auto& sizes : std::vector<std::vector<std::int64_t>>{{4, 24, 7, 9}, {2, 40, 5, 3}, {3, 3, 4, 4}}) {
    DYNAMIC_SECTION("shape " << sizes[0] << "x" << sizes[1] << "x" << sizes[2] << "x" << sizes[3]) {
      torch::manual_seed(3);
      const torch::Tensor x = torch::randn(sizes) * 2 + 0.7;
      const torch::Tensor dz = torch::randn(sizes);
      auto fused_bn = make_bn(static_cast<int>(sizes[1]));
      auto reference_bn = copy_of(fused_bn);
      for (int step = 0; step < 2; ++step) {  // twice: the running statistics move twice
        const Result fused = run(fused_bn, x * (1 + step), dz, true);
        const Result reference = run(reference_bn, x * (1 + step), dz, false);
        CHECK(fused.z.is_contiguous(at::MemoryFormat::ChannelsLast));
        CHECK(fused.dx.is_contiguous(at::MemoryFormat::ChannelsLast));
        CHECK(relative(fused.z, reference.z) < 1e-5);
        CHECK(relative(fused.dx, reference.dx) < 1e-4);
        CHECK(relative(fused.dweight, reference.dweight) < 1e-4);
        CHECK(relative(fused.dbias, reference.dbias) < 1e-4);
      }
      CHECK(relative(fused_bn->running_mean, reference_bn->running_mean) < 1e-5);
      CHECK(relative(fused_bn->running_var, reference_bn->running_var) < 1e-5);
      CHECK(fused_bn->num_batches_tracked.item<std::int64_t>() == 2);
      CHECK(reference_bn->num_batches_tracked.item<std::int64_t>() == 2);
    }
  }
}

TEST_CASE("fused BatchNorm+SiLU in bfloat16 is the float computation rounded once", "[bn_silu]") {
  torch::manual_seed(5);
  const std::vector<std::int64_t> sizes{4, 48, 6, 6};
  const torch::Tensor x = (torch::randn(sizes) * 3 - 1).to(torch::kBFloat16);
  const torch::Tensor dz = torch::randn(sizes).to(torch::kBFloat16);
  auto fused_bn = make_bn(48);
  auto reference_bn = copy_of(fused_bn);
  const Result fused = run(fused_bn, x, dz, true);
  const Result reference = run(reference_bn, x, dz, false);  // float32 from the same bfloat16 values
  CHECK(fused.z.scalar_type() == torch::kBFloat16);
  CHECK(fused.dx.scalar_type() == torch::kBFloat16);
  CHECK(fused.dweight.scalar_type() == torch::kFloat);
  // one rounding to bfloat16 (8 bits of mantissa: 2^-8 relative)
  CHECK(relative(fused.z, reference.z) < 8e-3);
  CHECK(relative(fused.dx, reference.dx) < 8e-3);
  CHECK(relative(fused.dweight, reference.dweight) < 1e-4);  // accumulated in float
  CHECK(relative(fused.dbias, reference.dbias) < 1e-4);
  CHECK(relative(fused_bn->running_var, reference_bn->running_var) < 1e-5);
}

TEST_CASE("fused BN+BN+SiLU (RepConvN's tail) equals two BatchNorm2d, their sum, then silu", "[bn_silu]") {
  for (const auto dtype : {torch::kFloat, torch::kBFloat16}) {
    for (const auto& sizes : std::vector<std::vector<std::int64_t>>{{3, 24, 5, 7}, {2, 40, 3, 3}}) {
      DYNAMIC_SECTION(c10::toString(dtype) << " " << sizes[0] << "x" << sizes[1] << "x" << sizes[2] << "x" << sizes[3]) {
        torch::manual_seed(13);
        const torch::Tensor x1 = (torch::randn(sizes) * 2 + 0.7).to(dtype), x2 = (torch::randn(sizes) - 0.3).to(dtype);
        const torch::Tensor dz = torch::randn(sizes).to(dtype);
        const int channels = static_cast<int>(sizes[1]);
        torch::nn::BatchNorm2d fused_bn[2] = {make_bn(channels), make_bn(channels)};
        torch::nn::BatchNorm2d reference_bn[2] = {copy_of(fused_bn[0]), copy_of(fused_bn[1])};
        // one bfloat16 rounding of the output and dx; float elsewhere
        const double rounded = dtype == torch::kFloat ? 1e-4 : 8e-3;
        for (int step = 0; step < 2; ++step) {
          std::vector<torch::Tensor> in[2], grads[2];
          torch::Tensor z[2];
          for (int fused = 0; fused < 2; ++fused) {
            auto* bn = fused ? fused_bn : reference_bn;
            for (const auto& t : {x1, x2}) {
              in[fused].push_back((t * (1 + step)).clone(at::MemoryFormat::ChannelsLast).requires_grad_(true));
            }
            bn[0]->zero_grad();
            bn[1]->zero_grad();
            if (fused) {
              REQUIRE(nn::fused_bn_silu_applies(in[1][0], *bn[0]));
              z[1] = nn::batch_norm_add_silu(in[1][0], *bn[0], in[1][1], *bn[1]);
            } else {
              z[0] = torch::silu(bn[0](in[0][0].to(torch::kFloat)) + bn[1](in[0][1].to(torch::kFloat)));
            }
            z[fused].backward(dz.to(z[fused].scalar_type()));
            for (int b = 0; b < 2; ++b) {
              grads[fused].insert(grads[fused].end(), {in[fused][b].grad(), bn[b]->weight.grad(), bn[b]->bias.grad()});
            }
          }
          CHECK(z[1].scalar_type() == dtype);
          CHECK(z[1].is_contiguous(at::MemoryFormat::ChannelsLast));
          CHECK(relative(z[1], z[0]) < (dtype == torch::kFloat ? 1e-5 : 8e-3));
          for (int b = 0; b < 2; ++b) {
            INFO("branch " << b + 1);
            CHECK(grads[1][3 * b].scalar_type() == dtype);
            CHECK(grads[1][3 * b].is_contiguous(at::MemoryFormat::ChannelsLast));
            CHECK(relative(grads[1][3 * b], grads[0][3 * b]) < rounded);
            CHECK(relative(grads[1][3 * b + 1], grads[0][3 * b + 1]) < 1e-4);
            CHECK(relative(grads[1][3 * b + 2], grads[0][3 * b + 2]) < 1e-4);
          }
          CHECK(grads[1][2].data_ptr() != grads[1][5].data_ptr());  // each bias its own gradient
        }
        for (int b = 0; b < 2; ++b) {
          CHECK(relative(fused_bn[b]->running_mean, reference_bn[b]->running_mean) < 1e-5);
          CHECK(relative(fused_bn[b]->running_var, reference_bn[b]->running_var) < 1e-5);
          CHECK(fused_bn[b]->num_batches_tracked.item<std::int64_t>() == 2);
        }
      }
    }
  }
}

TEST_CASE("RepConvN in training takes the fused BN+BN+SiLU and equals its unfused self", "[bn_silu]") {
  torch::manual_seed(17);
  nn::RepConvN fused(8, 24), reference(8, 24);
  {
    torch::NoGradGuard no_grad;
    for (std::size_t i = 0; i < fused->parameters().size(); ++i) reference->parameters()[i].copy_(fused->parameters()[i]);
  }
  const torch::Tensor input = torch::randn({2, 8, 9, 9}).contiguous(at::MemoryFormat::ChannelsLast);
  const torch::Tensor dz = torch::randn({2, 24, 9, 9});
  torch::Tensor x[2], z[2];
  for (int f = 0; f < 2; ++f) {
    nn::set_fused_bn_silu_enabled(f == 1);
    x[f] = input.clone().requires_grad_(true);
    z[f] = (f ? fused : reference)->forward(x[f]);
    z[f].backward(dz);
  }
  nn::set_fused_bn_silu_enabled(true);
  REQUIRE(z[1].grad_fn());
  CHECK(z[1].grad_fn()->name().find("BnBnSiluFunction") != std::string::npos);
  CHECK(z[0].grad_fn()->name().find("BnBnSiluFunction") == std::string::npos);
  CHECK(relative(z[1], z[0]) < 1e-5);
  CHECK(relative(x[1].grad(), x[0].grad()) < 1e-4);
  const auto fused_params = fused->named_parameters(), reference_params = reference->named_parameters();
  for (const auto& item : fused_params) {
    INFO(item.key());
    CHECK(relative(item.value().grad(), reference_params[item.key()].grad()) < 1e-4);
  }
  const auto fused_buffers = fused->named_buffers(), reference_buffers = reference->named_buffers();
  for (const auto& item : fused_buffers) {
    INFO(item.key());
    CHECK(relative(item.value().to(torch::kDouble), reference_buffers[item.key()].to(torch::kDouble)) < 1e-5);
  }
  // eval mode: the running statistics, never the fused kernels
  fused->eval();
  CHECK(fused->forward(input).grad_fn()->name().find("BnBnSiluFunction") == std::string::npos);
}

TEST_CASE("a gradient that is a channel slice of a wider channels-last tensor is read in place", "[bn_silu]") {
  const torch::Tensor wide = torch::randn({2, 40, 5, 6}).contiguous(at::MemoryFormat::ChannelsLast);
  const torch::Tensor slice = wide.narrow(1, 8, 24);  // what cat's backward hands each input
  CHECK(nn::channels_last_row_stride(wide) == 40);
  CHECK(nn::channels_last_row_stride(slice) == 40);
  CHECK(nn::channels_last_row_stride(wide.contiguous()) == 0);  // NCHW
  CHECK(nn::channels_last_row_stride(wide.narrow(2, 0, 3)) == 0);  // rows no longer evenly spaced
  CHECK(nn::channels_last_row_stride(torch::randn({2, 24, 1, 1}).contiguous(at::MemoryFormat::ChannelsLast)) == 24);
  for (const auto dtype : {torch::kFloat, torch::kBFloat16}) {
    for (const int inputs : {1, 2}) {
      INFO(c10::toString(dtype) << ", " << inputs << " input(s)");
      torch::manual_seed(19);
      const torch::Tensor x1 = torch::randn({2, 24, 5, 6}).to(dtype), x2 = torch::randn({2, 24, 5, 6}).to(dtype);
      auto bn1 = make_bn(24), bn2 = make_bn(24);
      torch::Tensor dx[2], dw[2];
      for (int strided = 0; strided < 2; ++strided) {
        auto b1 = copy_of(bn1), b2 = copy_of(bn2);
        torch::Tensor a = x1.clone(at::MemoryFormat::ChannelsLast).requires_grad_(true);
        torch::Tensor b = x2.clone(at::MemoryFormat::ChannelsLast).requires_grad_(true);
        torch::Tensor z = inputs == 1 ? nn::batch_norm_silu(a, *b1) : nn::batch_norm_add_silu(a, *b1, b, *b2);
        const torch::Tensor grad = wide.to(dtype).narrow(1, 8, 24);
        REQUIRE(nn::channels_last_row_stride(grad) == 40);
        z.backward(strided ? grad : grad.contiguous(at::MemoryFormat::ChannelsLast));
        dx[strided] = a.grad();
        dw[strided] = b1->weight.grad();
      }
      CHECK(torch::equal(dx[1], dx[0]));  // the same arithmetic on the same values
      CHECK(torch::equal(dw[1], dw[0]));
    }
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
  std::vector<nn::kernels::BnSiluKernelSet> sets;
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) sets.push_back(nn::kernels::AVX2::kernel_set());
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512dq")) {
    sets.push_back(nn::kernels::AVX512::kernel_set());
  }
#endif
  INFO("in use: " << nn::bn_silu_capability() << ", ATen: " << at::get_cpu_capability());
  CHECK(nn::bn_silu_capability() == at::get_cpu_capability());
  const nn::kernels::BnSiluShape shape{37, 40};
  // two inputs: the first alone is Conv+BN+SiLU's tail, both summed are RepConvN's
  const torch::Tensor x[2] = {torch::randn({shape.rows, shape.channels}), torch::randn({shape.rows, shape.channels}) * 2 - 1};
  const torch::Tensor dz = torch::randn({shape.rows, shape.channels});
  const torch::Tensor scale[2] = {torch::rand({shape.channels}) + 0.5, torch::rand({shape.channels}) + 0.25};
  const torch::Tensor shift = torch::randn({shape.channels});
  // mean, variance (each input), z, sum_dy, sum_dy_xhat, dy, dx (each input)
  auto outputs = [&](const nn::kernels::BnSiluKernelSet& set, int count) {
    std::vector<torch::Tensor> out;
    nn::kernels::BnBranch<float> branches[2];
    torch::Tensor sum_dy_xhat[2], dx[2];
    float* sums[2];
    float* dx_data[2];
    for (int b = 0; b < count; ++b) {
      torch::Tensor mean = torch::empty({shape.channels}), variance = torch::empty({shape.channels});
      set.f32.stats(x[b].data_ptr<float>(), shape, mean.data_ptr<float>(), variance.data_ptr<float>());
      const torch::Tensor invstd = (variance + 1e-3).rsqrt();
      branches[b] = {x[b].data_ptr<float>(), scale[b].data_ptr<float>(), mean.data_ptr<float>(), invstd.data_ptr<float>()};
      sum_dy_xhat[b] = torch::empty({shape.channels});
      sums[b] = sum_dy_xhat[b].data_ptr<float>();
      dx[b] = torch::empty_like(x[b]);
      dx_data[b] = dx[b].data_ptr<float>();
      out.insert(out.end(), {mean, variance, invstd});
    }
    torch::Tensor z = torch::empty_like(dz), sum_dy = torch::empty({shape.channels});
    set.f32.apply(branches, count, z.data_ptr<float>(), shape, shift.data_ptr<float>());
    set.f32.reduce(branches, count, dz.data_ptr<float>(), shape.channels, dx_data[0], shape, shift.data_ptr<float>(),
                   sum_dy.data_ptr<float>(), sums);
    const torch::Tensor dy = dx[0].clone();
    set.f32.input_grad(branches, count, dx_data[0], dx_data, shape, sum_dy.data_ptr<float>(), sums);
    out.insert(out.end(), {z, sum_dy, dy});
    for (int b = 0; b < count; ++b) out.insert(out.end(), {sum_dy_xhat[b], dx[b]});
    return out;
  };
  for (int count : {1, 2}) {
    INFO(count << " input(s)");
    const auto expected = outputs(plain, count);
    // against ATen: the statistics, y, silu, dy and the sums, and each dx from BatchNorm's formula
    torch::Tensor y = shift.clone();
    for (int b = 0; b < count; ++b) {
      CHECK(relative(expected[3 * b], x[b].mean(0)) < 1e-5);
      CHECK(relative(expected[3 * b + 1], x[b].var(0, /*unbiased=*/false)) < 1e-5);
      y = y + x[b] * scale[b];
    }
    y.requires_grad_(true);
    const torch::Tensor silu = torch::silu(y);
    silu.backward(dz);
    const std::size_t at = 3 * count;
    CHECK(relative(expected[at], silu) < 1e-5);
    CHECK(relative(expected[at + 1], y.grad().sum(0)) < 1e-4);
    CHECK(relative(expected[at + 2], y.grad()) < 1e-5);  // dy = dz silu'(y)
    for (int b = 0; b < count; ++b) {
      const torch::Tensor xhat = (x[b] - expected[3 * b]) * expected[3 * b + 2];
      const torch::Tensor sum_dy_xhat = (y.grad() * xhat).sum(0);
      CHECK(relative(expected[at + 3 + 2 * b], sum_dy_xhat) < 1e-4);
      const torch::Tensor dx = scale[b] * (y.grad() - y.grad().mean(0) - xhat * sum_dy_xhat / shape.rows);
      CHECK(relative(expected[at + 4 + 2 * b], dx) < 1e-4);
    }
    for (const auto& set : sets) {
      INFO(set.capability);
      const auto got = outputs(set, count);
      REQUIRE(got.size() == expected.size());
      for (std::size_t i = 0; i < got.size(); ++i) CHECK(relative(got[i], expected[i]) < 1e-5);
    }
  }
}

TEST_CASE("the fusion applies to training-mode channels-last float/bfloat16 only, and BaseConv uses it", "[bn_silu]") {
  auto bn = make_bn(8);
  const torch::Tensor x = torch::randn({2, 8, 4, 4});
  CHECK_FALSE(nn::fused_bn_silu_applies(x, *bn));  // NCHW
  const torch::Tensor cl = x.contiguous(at::MemoryFormat::ChannelsLast);
  CHECK(nn::fused_bn_silu_applies(cl, *bn));
  CHECK(nn::fused_bn_silu_applies(cl.to(torch::kBFloat16), *bn));
  CHECK_FALSE(nn::fused_bn_silu_applies(cl.to(torch::kDouble), *bn));
  CHECK_FALSE(nn::fused_bn_silu_applies(torch::randn({1, 8, 1, 1}).contiguous(at::MemoryFormat::ChannelsLast), *bn));  // one row
  bn->eval();
  CHECK_FALSE(nn::fused_bn_silu_applies(cl, *bn));

  // BaseConv in training mode: the fused path gives what its own modules give one after another
  torch::manual_seed(7);
  nn::BaseConv block(3, 16, 3, 1);
  nn::BaseConv reference(3, 16, 3, 1);
  {
    torch::NoGradGuard no_grad;
    for (std::size_t i = 0; i < block->parameters().size(); ++i) reference->parameters()[i].copy_(block->parameters()[i]);
  }
  const torch::Tensor input = torch::randn({2, 3, 10, 10}).contiguous(at::MemoryFormat::ChannelsLast);
  const torch::Tensor fused = block->forward(input);
  auto children = reference->named_children();
  auto& conv = *children["conv"]->as<torch::nn::Conv2dImpl>();
  auto& batch_norm = *children["bn"]->as<torch::nn::BatchNorm2dImpl>();
  const torch::Tensor conv_output = conv.forward(input);
  REQUIRE(nn::fused_bn_silu_applies(conv_output, batch_norm));  // so block->forward took the fused path
  const torch::Tensor unfused = torch::silu(batch_norm.forward(conv_output));
  CHECK(relative(fused, unfused) < 1e-5);
  CHECK(relative(block->named_buffers()["bn.running_var"], reference->named_buffers()["bn.running_var"]) < 1e-6);
}
