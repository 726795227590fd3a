#include "nn/bn_silu.h"

#include "nn/bn_silu_kernel.h"

#include <ATen/Version.h>
#include <torch/autograd.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <string_view>
#include <type_traits>
#include <vector>

namespace libreyolo::nn {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// ATen's own choice (cpuinfo, capped by ATEN_CPU_CAPABILITY), so that both run the same instructions.
const kernels::BnSiluKernelSet& kernel_set() {
  static const kernels::BnSiluKernelSet set = [] {
#if defined(__x86_64__)
    const std::string capability = at::get_cpu_capability();
    if (capability == "AVX512") return kernels::AVX512::kernel_set();
    if (capability == "AVX2") return kernels::AVX2::kernel_set();
#endif
    return kernels::DEFAULT::kernel_set();
  }();
  return set;
}

std::atomic<bool>& enabled_flag() {
  static std::atomic<bool> on = [] {
    const char* value = std::getenv("LIBREYOLO_FUSED_BN_SILU");
    return value == nullptr || std::string_view(value) != "0";
  }();
  return on;
}

kernels::BnSiluShape shape_of(const torch::Tensor& x) { return {x.numel() / x.size(1), x.size(1)}; }


template <typename Call>
void dispatch(const torch::Tensor& x, const Call& call) {
  if (x.scalar_type() == torch::kBFloat16) {
    call(kernel_set().bf16, static_cast<c10::BFloat16*>(nullptr));
  } else {
    call(kernel_set().f32, static_cast<float*>(nullptr));
  }
}

// What a BatchNorm's forward changes besides its output: num_batches_tracked (counted when the
// call is made, as BatchNorm2d's forward counts it), and the running statistics, where this batch
// weighs `factor`.
struct RunningStats {
  torch::Tensor mean, variance;
  double factor = 0.0;
  double eps = 0.0;
};

RunningStats running_stats_of(torch::nn::BatchNorm2dImpl& bn) {
  torch::NoGradGuard no_grad;
  bn.num_batches_tracked.add_(1);
  const double factor = bn.options.momentum().has_value()
                            ? *bn.options.momentum()
                            : 1.0 / static_cast<double>(bn.num_batches_tracked.item<std::int64_t>());
  return {bn.running_mean, bn.running_var, factor, bn.options.eps()};
}

// The shared forward and backward of 1 or 2 BatchNorms feeding one SiLU. Inputs, in autograd's
// order: x, weight, bias per branch.
torch::Tensor forward_branches(AutogradContext* ctx, const std::vector<torch::Tensor>& xs, const std::vector<torch::Tensor>& weights,
                               const std::vector<torch::Tensor>& biases, const std::vector<RunningStats>& running) {
  const int n = static_cast<int>(xs.size());
  const kernels::BnSiluShape shape = shape_of(xs[0]);
  const auto floats = xs[0].options().dtype(torch::kFloat);
  std::vector<torch::Tensor> saved;
  torch::Tensor z = torch::empty_like(xs[0], at::MemoryFormat::ChannelsLast);
  torch::NoGradGuard no_grad;  // (apply() runs forward without grad already; the running statistics are buffers)
  dispatch(xs[0], [&](const auto& kernels, auto* type) {
    using T = std::remove_pointer_t<decltype(type)>;
    kernels::BnBranch<T> branches[kernels::kMaxBranches];
    torch::Tensor shift = torch::zeros({shape.channels}, floats);
    float* shift_data = shift.mutable_data_ptr<float>();
    const double unbiased = static_cast<double>(shape.rows) / static_cast<double>(shape.rows - 1);
    for (int b = 0; b < n; ++b) {
      torch::Tensor mean = torch::empty({shape.channels}, floats), variance = torch::empty({shape.channels}, floats);
      torch::Tensor invstd = torch::empty({shape.channels}, floats), scale = torch::empty({shape.channels}, floats);
      kernels.stats(xs[b].const_data_ptr<T>(), shape, mean.mutable_data_ptr<float>(), variance.mutable_data_ptr<float>());
      // The per-channel values and the running statistics in one loop over the channels (as
      // tensor ops they were ten small ATen calls per BatchNorm, 2,900 per YOLOv9-t step).
      // fused_bn_silu_applies() checked that all of these are contiguous floats.
      const float *m = mean.const_data_ptr<float>(), *v = variance.const_data_ptr<float>();
      const float *w = weights[b].const_data_ptr<float>(), *bias = biases[b].const_data_ptr<float>();
      float *is = invstd.mutable_data_ptr<float>(), *sc = scale.mutable_data_ptr<float>();
      float *rm = running[b].mean.mutable_data_ptr<float>(), *rv = running[b].variance.mutable_data_ptr<float>();
      const float eps = static_cast<float>(running[b].eps), keep = static_cast<float>(1.0 - running[b].factor);
      const float factor = static_cast<float>(running[b].factor), var_factor = static_cast<float>(running[b].factor * unbiased);
      for (std::int64_t c = 0; c < shape.channels; ++c) {
        is[c] = 1.0f / std::sqrt(v[c] + eps);
        sc[c] = w[c] * is[c];
        shift_data[c] += bias[c] - m[c] * sc[c];
        rm[c] = rm[c] * keep + m[c] * factor;
        rv[c] = rv[c] * keep + v[c] * var_factor;
      }
      branches[b] = {xs[b].const_data_ptr<T>(), sc, m, is};
      saved.insert(saved.end(), {xs[b], mean, invstd, scale});
    }
    kernels.apply(branches, n, z.mutable_data_ptr<T>(), shape, shift.const_data_ptr<float>());
    saved.push_back(shift);
  });
  ctx->save_for_backward(saved);
  return z;
}

// Gradients in forward_branches' input order: dx, dweight, dbias per branch.
tensor_list backward_branches(AutogradContext* ctx, const torch::Tensor& grad) {
  const auto saved = ctx->get_saved_variables();
  const int n = static_cast<int>(saved.size() / 4);
  const torch::Tensor& x0 = saved[0];
  const torch::Tensor& shift = saved.back();
  torch::Tensor dz = grad.scalar_type() == x0.scalar_type() ? grad : grad.to(x0.scalar_type());
  std::int64_t dz_row_stride = channels_last_row_stride(dz);
  if (dz_row_stride == 0) {
    dz = dz.contiguous(at::MemoryFormat::ChannelsLast);
    dz_row_stride = dz.size(1);
  }
  const kernels::BnSiluShape shape = shape_of(x0);
  const auto floats = x0.options().dtype(torch::kFloat);
  torch::Tensor sum_dy = torch::empty({shape.channels}, floats);
  std::vector<torch::Tensor> sum_dy_xhat, dx;
  bool any_input = false;
  for (int b = 0; b < n; ++b) {
    sum_dy_xhat.push_back(torch::empty({shape.channels}, floats));
    any_input = any_input || ctx->needs_input_grad(3 * b);
  }
  dispatch(x0, [&](const auto& kernels, auto* type) {
    using T = std::remove_pointer_t<decltype(type)>;
    kernels::BnBranch<T> branches[kernels::kMaxBranches];
    float* sums[kernels::kMaxBranches];
    T* dx_data[kernels::kMaxBranches];
    for (int b = 0; b < n; ++b) {
      branches[b] = {saved[4 * b].const_data_ptr<T>(), saved[4 * b + 3].const_data_ptr<float>(),
                     saved[4 * b + 1].const_data_ptr<float>(), saved[4 * b + 2].const_data_ptr<float>()};
      sums[b] = sum_dy_xhat[b].mutable_data_ptr<float>();
      dx.push_back(b == 0 || any_input ? torch::empty_like(x0, at::MemoryFormat::ChannelsLast) : torch::Tensor());
      dx_data[b] = dx[b].defined() ? dx[b].template mutable_data_ptr<T>() : nullptr;
    }
    // dx[0] holds dy, then branch 0's dx
    kernels.reduce(branches, n, dz.const_data_ptr<T>(), dz_row_stride, dx_data[0], shape, shift.const_data_ptr<float>(),
                   sum_dy.mutable_data_ptr<float>(), sums);
    if (any_input) kernels.input_grad(branches, n, dx_data[0], dx_data, shape, sum_dy.const_data_ptr<float>(), sums);
  });
  tensor_list out;
  for (int b = 0; b < n; ++b) {
    out.push_back(ctx->needs_input_grad(3 * b) ? dx[b] : torch::Tensor());
    out.push_back(ctx->needs_input_grad(3 * b + 1) ? sum_dy_xhat[b] : torch::Tensor());
    // each bias its own tensor: AccumulateGrad may adopt a gradient as .grad
    out.push_back(ctx->needs_input_grad(3 * b + 2) ? (b == 0 ? sum_dy : sum_dy.clone()) : torch::Tensor());
  }
  return out;
}

struct BnSiluFunction : torch::autograd::Function<BnSiluFunction> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                               RunningStats running) {
    return forward_branches(ctx, {x}, {weight}, {bias}, {std::move(running)});
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    tensor_list out = backward_branches(ctx, grads[0]);
    out.emplace_back();  // running
    return out;
  }
};

struct BnBnSiluFunction : torch::autograd::Function<BnBnSiluFunction> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x1, const torch::Tensor& weight1,
                               const torch::Tensor& bias1, const torch::Tensor& x2, const torch::Tensor& weight2,
                               const torch::Tensor& bias2, RunningStats running1, RunningStats running2) {
    return forward_branches(ctx, {x1, x2}, {weight1, weight2}, {bias1, bias2}, {std::move(running1), std::move(running2)});
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    tensor_list out = backward_branches(ctx, grads[0]);
    out.emplace_back();
    out.emplace_back();
    return out;
  }
};

}  // namespace

bool fused_bn_silu_applies(const torch::Tensor& x, const torch::nn::BatchNorm2dImpl& bn) {
  if (!fused_bn_silu_enabled() || !bn.is_training() || !bn.options.affine() || !bn.options.track_running_stats()) return false;
  if (!x.device().is_cpu() || x.dim() != 4 || x.size(1) < 1 || x.numel() / x.size(1) < 2) return false;
  if (x.scalar_type() != torch::kFloat && x.scalar_type() != torch::kBFloat16) return false;
  if (!x.is_contiguous(at::MemoryFormat::ChannelsLast)) return false;
  for (const torch::Tensor* t : {&bn.weight, &bn.bias, &bn.running_mean, &bn.running_var}) {
    if (t->scalar_type() != torch::kFloat || !t->is_contiguous() || t->numel() != x.size(1)) return false;
  }
  return true;
}

torch::Tensor batch_norm_silu(const torch::Tensor& x, torch::nn::BatchNorm2dImpl& bn) {
  return BnSiluFunction::apply(x, bn.weight, bn.bias, running_stats_of(bn));
}

torch::Tensor batch_norm_add_silu(const torch::Tensor& x1, torch::nn::BatchNorm2dImpl& bn1, const torch::Tensor& x2,
                                  torch::nn::BatchNorm2dImpl& bn2) {
  TORCH_CHECK(x1.sizes() == x2.sizes() && x1.scalar_type() == x2.scalar_type(), "batch_norm_add_silu: the inputs differ, ",
              x1.sizes(), " ", x1.scalar_type(), " against ", x2.sizes(), " ", x2.scalar_type());
  return BnBnSiluFunction::apply(x1, bn1.weight, bn1.bias, x2, bn2.weight, bn2.bias, running_stats_of(bn1), running_stats_of(bn2));
}

bool fused_bn_silu_enabled() { return enabled_flag().load(std::memory_order_relaxed); }
void set_fused_bn_silu_enabled(bool enabled) { enabled_flag().store(enabled, std::memory_order_relaxed); }

std::int64_t channels_last_row_stride(const torch::Tensor& t) {
  if (t.dim() != 4 || t.stride(1) != 1 || t.size(2) < 2 || t.size(3) < 2) {
    return t.dim() == 4 && t.is_contiguous(at::MemoryFormat::ChannelsLast) ? t.size(1) : 0;
  }
  const std::int64_t ld = t.stride(3);
  if (ld < t.size(1) || t.stride(2) != t.size(3) * ld || t.stride(0) != t.size(2) * t.size(3) * ld) return 0;
  return ld;
}

std::string bn_silu_capability() { return kernel_set().capability; }

}  // namespace libreyolo::nn
