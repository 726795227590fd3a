#include "nn/bce_logits.h"

#include "nn/bce_logits_kernel.h"
#include "nn/cpu_kernels.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <torch/autograd.h>

namespace libreyolo::nn {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

const kernels::BceLogitsKernels& kernels_here() {
  static const kernels::BceLogitsKernels chosen = [] {
    switch (cpu_kernels()) {
#if defined(__x86_64__)
      case CpuKernels::Avx512: return kernels::AVX512::bce_logits_kernels();
      case CpuKernels::Avx2: return kernels::AVX2::bce_logits_kernels();
#endif
      default: return kernels::DEFAULT::bce_logits_kernels();
    }
  }();
  return chosen;
}

struct BceLogitsSumFunction : torch::autograd::Function<BceLogitsSumFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& logits, const at::Tensor& targets) {
    ctx->save_for_backward({logits, targets});
    const double sum = kernels_here().sum(logits.const_data_ptr<float>(), targets.const_data_ptr<float>(), logits.numel());
    return at::scalar_tensor(sum, logits.options());
  }

  // The gradient from the saved inputs, scaled by the upstream one as it is written: one pass.
  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &logits = saved[0], &targets = saved[1];
    at::Tensor grad = at::empty_like(logits, at::MemoryFormat::Contiguous);
    kernels_here().grad(logits.const_data_ptr<float>(), targets.const_data_ptr<float>(), logits.numel(),
                        *grads[0].const_data_ptr<float>(),  // CPU memory: read, not item() (no host-read operator)
                        grad.mutable_data_ptr<float>());
    return {grad, at::Tensor()};
  }
};

}  // namespace

bool fused_bce_applies(const at::Tensor& logits, const at::Tensor& targets) {
  return logits.device().is_cpu() && targets.device().is_cpu() && logits.scalar_type() == at::kFloat &&
         targets.scalar_type() == at::kFloat && logits.sizes() == targets.sizes() && logits.is_contiguous() &&
         targets.is_contiguous() && !targets.requires_grad();
}

at::Tensor bce_with_logits_sum(const at::Tensor& logits, const at::Tensor& targets) {
  if (!fused_bce_applies(logits, targets)) {
    return at::binary_cross_entropy_with_logits(logits, targets, {}, {}, at::Reduction::Sum);
  }
  RECORD_FUNCTION("libreyolo::bce_with_logits_sum", std::vector<c10::IValue>{});  // listed by the profiler as ATen's ops are
  return BceLogitsSumFunction::apply(logits, targets);
}

}  // namespace libreyolo::nn
