#include "train/sync_batch_norm.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

namespace libreyolo::train {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

const std::vector<std::int64_t> kReduced{0, 2, 3};  // every dimension but the channel

at::Tensor per_channel(const at::Tensor& v) { return v.view({1, -1, 1, 1}); }

class SyncBatchNormFunction : public torch::autograd::Function<SyncBatchNormFunction> {
 public:
  // `running_mean` / `running_var` are updated in place with `momentum` (PyTorch's convention:
  // new = (1 − momentum)·old + momentum·batch, the variance unbiased).
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                            at::Tensor running_mean, at::Tensor running_var, double eps, double momentum,
                            Collectives* collectives) {
    const std::int64_t channels = x.size(1);
    const at::Tensor xf = x.to(at::kFloat);
    // sums in double: the variance is E[x²] − μ², which cancels badly in float
    const at::Tensor local = at::cat({xf.sum(kReduced, false, at::kDouble), xf.square().sum(kReduced, false, at::kDouble),
                                      at::full({1}, static_cast<double>(x.numel() / std::max<std::int64_t>(channels, 1)),
                                               xf.options().dtype(at::kDouble))});
    at::Tensor stats = local.clone();
    collectives->sum(stats);
    const at::Tensor count = stats.narrow(0, 2 * channels, 1);
    const at::Tensor mean = stats.narrow(0, 0, channels) / count;
    const at::Tensor var = (stats.narrow(0, channels, channels) / count - mean.square()).clamp_min(0);
    const at::Tensor invstd = (var + eps).rsqrt();
    {
      at::NoGradGuard no_grad;
      if (running_mean.defined()) {
        const at::Tensor unbiased = var * count / (count - 1).clamp_min(1);
        running_mean.mul_(1 - momentum).add_(mean.to(running_mean.scalar_type()), momentum);
        running_var.mul_(1 - momentum).add_(unbiased.to(running_var.scalar_type()), momentum);
      }
    }
    const at::Tensor mean_f = mean.to(at::kFloat), invstd_f = invstd.to(at::kFloat);
    at::Tensor y = (xf - per_channel(mean_f)) * per_channel(invstd_f);
    if (weight.defined()) y = y * per_channel(weight.to(at::kFloat)) + per_channel(bias.to(at::kFloat));
    ctx->save_for_backward({x, weight, mean_f, invstd_f, count.to(at::kFloat)});  // no host read: NCCL stays async
    ctx->saved_data["collectives"] = reinterpret_cast<std::int64_t>(collectives);
    return y.to(x.scalar_type());
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& x = saved[0];
    const at::Tensor& weight = saved[1];
    const at::Tensor& mean = saved[2];
    const at::Tensor& invstd = saved[3];
    auto* collectives = reinterpret_cast<Collectives*>(ctx->saved_data["collectives"].toInt());
    const at::Tensor& count = saved[4];
    const std::int64_t channels = x.size(1);
    const at::Tensor dy = grad_outputs[0].to(at::kFloat);
    const at::Tensor centred = x.to(at::kFloat) - per_channel(mean);
    const at::Tensor sum_dy = dy.sum(kReduced);
    const at::Tensor sum_dy_centred = (dy * centred).sum(kReduced);
    at::Tensor grad_weight, grad_bias, grad_x;
    if (weight.defined()) {
      grad_weight = (sum_dy_centred * invstd).to(weight.scalar_type());
      grad_bias = sum_dy.to(weight.scalar_type());
    }
    if (ctx->needs_input_grad(0)) {
      at::Tensor sums = at::cat({sum_dy, sum_dy_centred});
      collectives->sum(sums);  // over every rank's samples
      const at::Tensor mean_dy = sums.narrow(0, 0, channels) / count;
      const at::Tensor mean_dy_centred = sums.narrow(0, channels, channels) / count;
      const at::Tensor scale = weight.defined() ? invstd * weight.to(at::kFloat) : invstd;
      grad_x = ((dy - per_channel(mean_dy) - centred * per_channel(invstd.square() * mean_dy_centred)) * per_channel(scale))
                   .to(x.scalar_type());
    }
    return {grad_x, grad_weight, grad_bias, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

torch::Tensor SyncBatchNorm::forward(const torch::Tensor& x, torch::nn::BatchNorm2dImpl& bn) {
  const double momentum = bn.options.momentum().value_or(0.1);
  if (bn.num_batches_tracked.defined()) {
    at::NoGradGuard no_grad;
    bn.num_batches_tracked.add_(1);
  }
  return SyncBatchNormFunction::apply(x, bn.weight, bn.bias, bn.running_mean, bn.running_var, bn.options.eps(), momentum,
                                      &collectives_);
}

torch::Tensor SyncBatchNorm::forward_silu(const torch::Tensor& x, torch::nn::BatchNorm2dImpl& bn) {
  if (!nn::fused_bn_silu_sync_applies(x, bn)) return {};
  return nn::batch_norm_silu_synced(x, bn, sum_, collectives_.rank(), collectives_.world_size());
}

}  // namespace libreyolo::train
