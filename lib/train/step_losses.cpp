#include "train/step_losses.h"

#include <ATen/ATen.h>

namespace libreyolo::train {

void StepLosses::add(const models::LossTerms& terms, const std::vector<std::string>& names, const at::Tensor& gradients_finite) {
  std::vector<at::Tensor> values{terms.total.detach().reshape({})};
  for (const auto& n : names) values.push_back(terms.part(n).detach().reshape({}));
  const at::Tensor step = at::stack(values).to(at::kDouble);
  sums_ = sums_.defined() ? sums_ + step : step;
  if (gradients_finite.defined()) {
    const at::Tensor flag = gradients_finite.reshape({}).to(at::kBool);
    gradients_finite_ = gradients_finite_.defined() ? gradients_finite_.logical_and(flag) : flag;
  }
  ++steps_;
}

StepLosses::Values StepLosses::read() {
  Values out;
  out.steps = steps_;
  if (!sums_.defined()) return out;
  const at::Tensor flag = gradients_finite_.defined() ? gradients_finite_.to(at::kDouble).reshape({1})
                                                      : at::ones({1}, sums_.options());
  const at::Tensor host = at::cat({sums_, flag}).cpu();  // the one transfer
  const double* v = host.data_ptr<double>();
  out.sums.assign(v, v + sums_.numel());
  out.gradients_finite = v[sums_.numel()] >= 1.0;
  sums_ = at::Tensor();
  gradients_finite_ = at::Tensor();
  steps_ = 0;
  return out;
}

}  // namespace libreyolo::train
