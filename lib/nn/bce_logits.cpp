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

kernels::BceLogitsSumFn kernel() {
  static const kernels::BceLogitsSumFn chosen = [] {
    switch (cpu_kernels()) {
#if defined(__x86_64__)
      case CpuKernels::Avx512: return kernels::AVX512::bce_logits_sum_kernel();
      case CpuKernels::Avx2: return kernels::AVX2::bce_logits_sum_kernel();
#endif
      default: return kernels::DEFAULT::bce_logits_sum_kernel();
    }
  }();
  return chosen;
}

struct BceLogitsSumFunction : torch::autograd::Function<BceLogitsSumFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& logits, const at::Tensor& targets, bool need_grad) {
    at::Tensor grad = need_grad ? at::empty_like(logits, at::MemoryFormat::Contiguous) : at::Tensor();
    const double sum = kernel()(logits.const_data_ptr<float>(), targets.const_data_ptr<float>(), logits.numel(),
                                need_grad ? grad.mutable_data_ptr<float>() : nullptr);
    ctx->save_for_backward({grad});
    return at::scalar_tensor(sum, logits.options());
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const at::Tensor grad = ctx->get_saved_variables()[0];
    TORCH_CHECK(grad.defined(), "bce_with_logits_sum: backward through a forward that kept no gradient");
    // out of place: the graph may be run backward again (retain_graph)
    return {grad * grads[0], at::Tensor(), at::Tensor()};
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
  const bool need_grad = at::GradMode::is_enabled() && logits.requires_grad();
  return BceLogitsSumFunction::apply(logits, targets, need_grad);
}

}  // namespace libreyolo::nn
