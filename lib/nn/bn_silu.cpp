#include "nn/bn_silu.h"

#include "nn/bn_silu_kernel.h"
#include "nn/cpu_kernels.h"

#include <ATen/record_function.h>
#include <torch/autograd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string_view>

namespace libreyolo::nn {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

const kernels::BnSiluKernelSet& kernel_set() {
  static const kernels::BnSiluKernelSet set = [] {
    switch (cpu_kernels()) {
#if defined(__x86_64__)
      case CpuKernels::Avx512: return kernels::AVX512::kernel_set();
      case CpuKernels::Avx2: return kernels::AVX2::kernel_set();
#endif
      default: return kernels::DEFAULT::kernel_set();
    }
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

// NCHW-contiguous (and not also channels-last, as a tensor with one pixel or one channel is).
bool is_planar(const torch::Tensor& x) {
  return !x.is_contiguous(at::MemoryFormat::ChannelsLast) && x.is_contiguous(at::MemoryFormat::Contiguous);
}
kernels::BnSiluPlanes planes_of(const torch::Tensor& x) { return {x.size(0), x.size(1), x.size(2) * x.size(3)}; }

// Whether each (n, c) plane of a 4-D tensor is contiguous, wherever the planes start: what the
// planar backward reads in place (a contiguous gradient, or a channel slice of a wider one, as
// cat's and split's backward hand on).
bool has_planes(const torch::Tensor& t) {
  return t.dim() == 4 && t.stride(3) == 1 && (t.size(2) == 1 || t.stride(2) == t.size(3));
}

template <typename Call>
void dispatch(const torch::Tensor& x, const Call& call) {
  if (x.scalar_type() == torch::kBFloat16) {
    call(kernel_set().bf16, static_cast<c10::BFloat16*>(nullptr));
  } else {
    call(kernel_set().f32, static_cast<float*>(nullptr));
  }
}

// The running statistics moved towards this batch's: `factor` its weight, `unbiased` the variance's
// n / (n - 1) (as BatchNorm2d's forward).
void update_running(torch::Tensor& running_mean, torch::Tensor& running_var, const float* mean, const float* variance,
                    std::int64_t channels, double factor, double unbiased) {
  float *rm = running_mean.mutable_data_ptr<float>(), *rv = running_var.mutable_data_ptr<float>();
  const float keep = static_cast<float>(1.0 - factor), weigh = static_cast<float>(factor);
  const float weigh_var = static_cast<float>(factor * unbiased);
  for (std::int64_t c = 0; c < channels; ++c) {
    rm[c] = rm[c] * keep + mean[c] * weigh;
    rv[c] = rv[c] * keep + variance[c] * weigh_var;
  }
}

// `dz` as the channels-last kernels read it (made channels-last where its rows are not evenly
// spaced), and the distance between its rows.
std::int64_t channels_last_rows(torch::Tensor& dz) {
  const std::int64_t stride = channels_last_row_stride(dz);
  if (stride != 0) return stride;
  dz = dz.contiguous(at::MemoryFormat::ChannelsLast);
  return dz.size(1);
}

struct BnSiluFunction : torch::autograd::Function<BnSiluFunction> {
  // running_mean and running_var are updated in place; `factor` weighs this batch into them.
  // `relu`: ReLU in SiLU's place (channels-last only: fused_bn_relu_applies()).
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& weight,
                               const torch::Tensor& bias, torch::Tensor running_mean, torch::Tensor running_var,
                               double factor, double eps, bool relu) {
    const bool planar = is_planar(x);
    TORCH_CHECK(!(relu && planar), "the fused BatchNorm+ReLU takes channels-last input");
    ctx->saved_data["relu"] = relu;
    const kernels::BnSiluShape shape = shape_of(x);
    const auto floats = x.options().dtype(torch::kFloat);
    torch::Tensor mean = torch::empty({shape.channels}, floats);
    torch::Tensor variance = torch::empty({shape.channels}, floats);
    torch::Tensor z = torch::empty_like(x, planar ? at::MemoryFormat::Contiguous : at::MemoryFormat::ChannelsLast);
    torch::Tensor invstd = torch::empty({shape.channels}, floats), scale = torch::empty({shape.channels}, floats);
    torch::Tensor shift = torch::empty({shape.channels}, floats);
    // fused_bn_silu_applies() checked that all of the per-channel tensors are contiguous floats
    const float *w = weight.const_data_ptr<float>(), *b = bias.const_data_ptr<float>();
    const float* m = mean.const_data_ptr<float>();
    float* v = variance.mutable_data_ptr<float>();
    float *is = invstd.mutable_data_ptr<float>(), *sc = scale.mutable_data_ptr<float>(), *sh = shift.mutable_data_ptr<float>();
    const float epsilon = static_cast<float>(eps);
    dispatch(x, [&](const auto& kernels, auto* type) {
      using T = std::remove_pointer_t<decltype(type)>;
      if (planar) {  // the per-channel values come with the statistics, each channel in one go
        kernels.planar_forward(x.const_data_ptr<T>(), z.mutable_data_ptr<T>(), planes_of(x), w, b, epsilon,
                               mean.mutable_data_ptr<float>(), v, is, sc, sh);
        return;
      }
      kernels.stats(x.const_data_ptr<T>(), shape, mean.mutable_data_ptr<float>(), v);
      // The per-channel values in one loop over the channels (as tensor ops they were ten small
      // ATen calls per BatchNorm, with the running statistics', 2,900 per YOLOv9-t step).
      for (std::int64_t c = 0; c < shape.channels; ++c) kernels::fold_channel(m[c], v[c], w[c], b[c], epsilon, is[c], sc[c], sh[c]);
      (relu ? kernels.apply_relu : kernels.apply)(x.const_data_ptr<T>(), z.mutable_data_ptr<T>(), shape, sc, sh);
    });
    update_running(running_mean, running_var, m, v, shape.channels, factor,
                   static_cast<double>(shape.rows) / static_cast<double>(shape.rows - 1));
    ctx->save_for_backward({x, weight, mean, invstd, scale, shift});
    return z;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& x = saved[0];
    const torch::Tensor& weight = saved[1];
    const torch::Tensor &mean = saved[2], &invstd = saved[3], &scale = saved[4], &shift = saved[5];
    const bool planar = is_planar(x);
    torch::Tensor dz = grads[0].scalar_type() == x.scalar_type() ? grads[0] : grads[0].to(x.scalar_type());
    const kernels::BnSiluShape shape = shape_of(x);
    const auto floats = x.options().dtype(torch::kFloat);
    torch::Tensor sum_dy = torch::empty({shape.channels}, floats);
    torch::Tensor sum_dy_xhat = torch::empty({shape.channels}, floats);
    torch::Tensor dx;
    const torch::Tensor& gamma = weight;  // float and contiguous: fused_bn_silu_applies() checked
    const float *sc = scale.const_data_ptr<float>(), *sh = shift.const_data_ptr<float>();
    const float *m = mean.const_data_ptr<float>(), *is = invstd.const_data_ptr<float>();
    float *sdy = sum_dy.mutable_data_ptr<float>(), *sdx = sum_dy_xhat.mutable_data_ptr<float>();
    if (planar) {
      if (!has_planes(dz)) dz = dz.contiguous();
      if (ctx->needs_input_grad(0)) dx = torch::empty_like(x, at::MemoryFormat::Contiguous);
      dispatch(x, [&](const auto& kernels, auto* type) {
        using T = std::remove_pointer_t<decltype(type)>;
        kernels.planar_backward(x.const_data_ptr<T>(), dz.const_data_ptr<T>(), dz.stride(0), dz.stride(1),
                                dx.defined() ? dx.mutable_data_ptr<T>() : nullptr, planes_of(x), sc, sh, m, is,
                                gamma.const_data_ptr<float>(), sdy, sdx);
      });
    } else {
      const std::int64_t dz_row_stride = channels_last_rows(dz);
      dispatch(x, [&](const auto& kernels, auto* type) {
        using T = std::remove_pointer_t<decltype(type)>;
        dx = torch::empty_like(x, at::MemoryFormat::ChannelsLast);  // holds dy, then dx
        const bool relu = ctx->saved_data["relu"].toBool();
        (relu ? kernels.reduce_relu : kernels.reduce)(x.const_data_ptr<T>(), dz.const_data_ptr<T>(), dz_row_stride,
                                                      dx.mutable_data_ptr<T>(), shape, sc, sh, m, is, sdy, sdx);
        if (ctx->needs_input_grad(0)) {
          kernels.input_grad(x.const_data_ptr<T>(), dx.mutable_data_ptr<T>(), shape, m, is, gamma.const_data_ptr<float>(),
                             sdy, sdx);
        } else {
          dx = torch::Tensor();
        }
      });
    }
    torch::Tensor grad_weight = ctx->needs_input_grad(1) ? sum_dy_xhat : torch::Tensor();
    torch::Tensor grad_bias = ctx->needs_input_grad(2) ? sum_dy : torch::Tensor();
    return {dx, grad_weight, grad_bias, torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

// The channels-last kernels with the statistics of every rank's batch (batch_norm_silu_synced).
struct BnSiluSyncFunction : torch::autograd::Function<BnSiluSyncFunction> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& weight,
                               const torch::Tensor& bias, torch::Tensor running_mean, torch::Tensor running_var,
                               double factor, double eps, const RankSum* sum, std::int64_t rank, std::int64_t world_size) {
    const kernels::BnSiluShape shape = shape_of(x);
    const std::int64_t channels = shape.channels;
    const auto floats = x.options().dtype(torch::kFloat);
    torch::Tensor local_mean = torch::empty({channels}, floats), local_variance = torch::empty({channels}, floats);
    dispatch(x, [&](const auto& kernels, auto* type) {
      using T = std::remove_pointer_t<decltype(type)>;
      kernels.stats(x.const_data_ptr<T>(), shape, local_mean.mutable_data_ptr<float>(), local_variance.mutable_data_ptr<float>());
    });
    // every rank's (mean, variance, rows) in its own row, the others' rows zero: a sum gathers them
    torch::Tensor table = torch::zeros({world_size, 2 * channels + 1}, floats.dtype(torch::kDouble));
    table[rank].narrow(0, 0, channels).copy_(local_mean);
    table[rank].narrow(0, channels, channels).copy_(local_variance);
    table[rank][2 * channels] = static_cast<double>(shape.rows);
    (*sum)(table);
    table = table.contiguous();
    const double* t = table.const_data_ptr<double>();
    const std::int64_t width = 2 * channels + 1;
    double total = 0;
    for (std::int64_t r = 0; r < world_size; ++r) total += t[r * width + 2 * channels];
    torch::Tensor mean = torch::empty({channels}, floats), variance = torch::empty({channels}, floats);
    torch::Tensor invstd = torch::empty({channels}, floats), scale = torch::empty({channels}, floats);
    torch::Tensor shift = torch::empty({channels}, floats);
    float *m = mean.mutable_data_ptr<float>(), *v = variance.mutable_data_ptr<float>();
    float *is = invstd.mutable_data_ptr<float>(), *sc = scale.mutable_data_ptr<float>(), *sh = shift.mutable_data_ptr<float>();
    const float *w = weight.const_data_ptr<float>(), *b = bias.const_data_ptr<float>();
    for (std::int64_t c = 0; c < channels; ++c) {
      // Chan's merge: the global mean, and the within-rank plus between-rank squared deviations
      double weighted = 0;
      for (std::int64_t r = 0; r < world_size; ++r) weighted += t[r * width + 2 * channels] * t[r * width + c];
      const double mu = weighted / total;
      double squares = 0;
      for (std::int64_t r = 0; r < world_size; ++r) {
        const double n = t[r * width + 2 * channels], d = t[r * width + c] - mu;
        squares += n * (t[r * width + channels + c] + d * d);
      }
      m[c] = static_cast<float>(mu);
      v[c] = static_cast<float>(squares / total);
      kernels::fold_channel(m[c], v[c], w[c], b[c], static_cast<float>(eps), is[c], sc[c], sh[c]);
    }
    update_running(running_mean, running_var, m, v, channels, factor, total / std::max(total - 1.0, 1.0));
    torch::Tensor z = torch::empty_like(x, at::MemoryFormat::ChannelsLast);
    dispatch(x, [&](const auto& kernels, auto* type) {
      using T = std::remove_pointer_t<decltype(type)>;
      kernels.apply(x.const_data_ptr<T>(), z.mutable_data_ptr<T>(), shape, sc, sh);
    });
    ctx->save_for_backward({x, weight, mean, invstd, scale, shift});
    ctx->saved_data["sum"] = reinterpret_cast<std::int64_t>(sum);
    ctx->saved_data["rows"] = total;
    return z;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& x = saved[0];
    const torch::Tensor& weight = saved[1];
    const torch::Tensor &mean = saved[2], &invstd = saved[3], &scale = saved[4], &shift = saved[5];
    const auto* sum = reinterpret_cast<const RankSum*>(ctx->saved_data["sum"].toInt());
    const double total = ctx->saved_data["rows"].toDouble();
    torch::Tensor dz = grads[0].scalar_type() == x.scalar_type() ? grads[0] : grads[0].to(x.scalar_type());
    const kernels::BnSiluShape shape = shape_of(x);
    const auto floats = x.options().dtype(torch::kFloat);
    torch::Tensor sums = torch::empty({2, shape.channels}, floats);
    torch::Tensor sum_dy = sums[0], sum_dy_xhat = sums[1];
    const std::int64_t dz_row_stride = channels_last_rows(dz);
    const float *sc = scale.const_data_ptr<float>(), *sh = shift.const_data_ptr<float>();
    const float *m = mean.const_data_ptr<float>(), *is = invstd.const_data_ptr<float>();
    torch::Tensor dx = torch::empty_like(x, at::MemoryFormat::ChannelsLast);  // holds dy, then dx
    dispatch(x, [&](const auto& kernels, auto* type) {
      using T = std::remove_pointer_t<decltype(type)>;
      kernels.reduce(x.const_data_ptr<T>(), dz.const_data_ptr<T>(), dz_row_stride, dx.mutable_data_ptr<T>(), shape, sc, sh, m,
                     is, sum_dy.mutable_data_ptr<float>(), sum_dy_xhat.mutable_data_ptr<float>());
    });
    const torch::Tensor grad_weight = ctx->needs_input_grad(1) ? sum_dy_xhat.clone() : torch::Tensor();
    const torch::Tensor grad_bias = ctx->needs_input_grad(2) ? sum_dy.clone() : torch::Tensor();
    if (ctx->needs_input_grad(0)) {
      torch::Tensor global = sums.clone();
      (*sum)(global);  // over every rank's samples
      // the kernel divides by this batch's rows: the global sums scaled to them give the global means
      global.mul_(static_cast<double>(shape.rows) / total);
      dispatch(x, [&](const auto& kernels, auto* type) {
        using T = std::remove_pointer_t<decltype(type)>;
        kernels.input_grad(x.const_data_ptr<T>(), dx.mutable_data_ptr<T>(), shape, m, is, weight.const_data_ptr<float>(),
                           global[0].const_data_ptr<float>(), global[1].const_data_ptr<float>());
      });
    } else {
      dx = torch::Tensor();
    }
    return {dx, grad_weight, grad_bias, torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor(),
            torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

// The running statistics' weight of this batch, after counting it (as BatchNorm2d's forward).
double count_batch(torch::nn::BatchNorm2dImpl& bn) {
  torch::NoGradGuard no_grad;
  bn.num_batches_tracked.add_(1);
  return bn.options.momentum().has_value() ? *bn.options.momentum()
                                           : 1.0 / static_cast<double>(bn.num_batches_tracked.item<std::int64_t>());
}

}  // namespace

bool fused_bn_silu_sync_applies(const torch::Tensor& x, const torch::nn::BatchNorm2dImpl& bn) {
  static const bool enabled = [] {
    const char* value = std::getenv("LIBREYOLO_FUSED_SYNC_BN");
    return value == nullptr || std::string_view(value) != "0";
  }();
  return enabled && fused_bn_silu_applies(x, bn) && !is_planar(x);
}

torch::Tensor batch_norm_silu_synced(const torch::Tensor& x, torch::nn::BatchNorm2dImpl& bn, const RankSum& sum, int rank,
                                     int world_size) {
  RECORD_FUNCTION("libreyolo::batch_norm_silu_synced", std::vector<c10::IValue>{});
  const double factor = count_batch(bn);
  return BnSiluSyncFunction::apply(x, bn.weight, bn.bias, bn.running_mean, bn.running_var, factor, bn.options.eps(), &sum,
                                   static_cast<std::int64_t>(rank), static_cast<std::int64_t>(world_size));
}

bool fused_bn_silu_applies(const torch::Tensor& x, const torch::nn::BatchNorm2dImpl& bn) {
  if (!fused_bn_silu_enabled() || !bn.is_training() || !bn.options.affine() || !bn.options.track_running_stats()) return false;
  if (!x.device().is_cpu() || x.dim() != 4 || x.size(1) < 1 || x.numel() / x.size(1) < 2) return false;
  if (x.scalar_type() != torch::kFloat && x.scalar_type() != torch::kBFloat16) return false;
  if (!x.is_contiguous(at::MemoryFormat::ChannelsLast) && !x.is_contiguous(at::MemoryFormat::Contiguous)) return false;
  for (const torch::Tensor* t : {&bn.weight, &bn.bias, &bn.running_mean, &bn.running_var}) {
    if (t->scalar_type() != torch::kFloat || !t->is_contiguous() || t->numel() != x.size(1)) return false;
  }
  return true;
}

torch::Tensor batch_norm_silu(const torch::Tensor& x, torch::nn::BatchNorm2dImpl& bn) {
  RECORD_FUNCTION("libreyolo::batch_norm_silu", std::vector<c10::IValue>{});  // listed by the profiler as ATen's ops are
  const double factor = count_batch(bn);
  return BnSiluFunction::apply(x, bn.weight, bn.bias, bn.running_mean, bn.running_var, factor, bn.options.eps(), false);
}

bool fused_bn_relu_applies(const torch::Tensor& x, const torch::nn::BatchNorm2dImpl& bn) {
  // strictly channels-last: a tensor that is NCHW-contiguous too (one pixel) keeps ATen's ops
  return fused_bn_silu_applies(x, bn) && x.is_contiguous(at::MemoryFormat::ChannelsLast) && !x.is_contiguous();
}

torch::Tensor batch_norm_relu(const torch::Tensor& x, torch::nn::BatchNorm2dImpl& bn) {
  RECORD_FUNCTION("libreyolo::batch_norm_relu", std::vector<c10::IValue>{});
  const double factor = count_batch(bn);
  return BnSiluFunction::apply(x, bn.weight, bn.bias, bn.running_mean, bn.running_var, factor, bn.options.eps(), true);
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
