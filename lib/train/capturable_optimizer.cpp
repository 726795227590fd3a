#include "train/capturable_optimizer.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <type_traits>
#include <memory>

namespace libreyolo::train {

namespace {

// The parameters of a group that have gradients (those a step updates), with their gradients.
struct Live {
  std::vector<at::Tensor> params, grads;
};

Live live(const torch::optim::OptimizerParamGroup& group) {
  Live out;
  for (const auto& p : group.params()) {
    if (!p.grad().defined()) continue;
    out.params.push_back(p);
    out.grads.push_back(p.grad());
  }
  return out;
}

at::Tensor device_scalar(const at::Tensor& like, double value, at::ScalarType dtype = at::kFloat) {
  return at::full({}, value, like.options().dtype(dtype).requires_grad(false));
}

// The groups' device scalars, made on first use on the device of each group's first parameter.
// Adam's (`with_step`) are doubles: 1 − β2^t cancels badly in float (0.999^t), and PyTorch
// computes its bias corrections in double on the host.
void ensure_scalars(std::vector<GroupScalars>& scalars, const std::vector<torch::optim::OptimizerParamGroup>& groups,
                    bool with_step, const std::function<double(std::size_t)>& initial_step) {
  if (scalars.size() == groups.size()) return;
  scalars.clear();
  const at::ScalarType dtype = with_step ? at::kDouble : at::kFloat;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const at::Tensor& first = groups[g].params().front();
    scalars.push_back({device_scalar(first, 0, dtype), device_scalar(first, 0, dtype),
                       with_step ? device_scalar(first, initial_step(g), dtype) : at::Tensor()});
  }
}

// A gradient list with the overflowed step's values zeroed (where `skip`), so that the update
// below computes nothing from them; in place: the gradients of a skipped step are garbage.
void zero_where(std::vector<at::Tensor>& tensors, const at::Tensor& skip) {
  for (auto& t : tensors) t.masked_fill_(skip, 0);
}

// torch::optim's step(): the closure (under grad mode) for the loss, then stage and apply unmasked.
at::Tensor staged_step(CapturableOptimizer& optimizer, const torch::optim::Optimizer::LossClosure& closure) {
  at::Tensor loss;
  if (closure) {
    at::AutoGradMode grad(true);
    loss = closure();
  }
  optimizer.stage();
  optimizer.apply({});
  return loss;
}

// The group loop both optimizers share. On the CPU (`host`) the flag is read back for free and a
// skipped step is not taken at all; on a GPU `skip` masks it on the device.
template <typename Options, typename OnHost, typename OnDevice>
void apply_groups(torch::optim::Optimizer& optimizer, const std::vector<GroupScalars>& scalars, bool host,
                  const at::Tensor& found_inf, const OnHost& on_host, const OnDevice& on_device) {
  at::NoGradGuard no_grad;
  if (host && found_inf.defined() && found_inf.item<double>() != 0) return;
  const at::Tensor skip = !host && found_inf.defined() ? found_inf.ne(0) : at::Tensor();
  for (std::size_t g = 0; g < optimizer.param_groups().size(); ++g) {
    const auto& group = optimizer.param_groups()[g];
    Live l = live(group);
    if (l.params.empty()) continue;
    const auto& o = static_cast<const Options&>(group.options());
    if (host) on_host(optimizer, o, l, scalars.at(g));
    else on_device(optimizer, o, l, scalars.at(g), skip);
  }
}

template <typename State>
State& state_of(torch::optim::Optimizer& optimizer, const at::Tensor& p) {
  return static_cast<State&>(*optimizer.state().at(p.unsafeGetTensorImpl()));
}

// Whether ATen's fused SGD kernel can take this parameter: it walks the parameter, its gradient and
// its momentum buffer as flat arrays, so all three must be laid out alike (a channels-last weight
// with a contiguous gradient is not; bench/optimizer_step counts those), in float.
bool flat_alike(const at::Tensor& p, const at::Tensor& g, const at::Tensor* buf) {
  if (p.scalar_type() != at::kFloat || g.scalar_type() != at::kFloat || !p.is_non_overlapping_and_dense()) return false;
  if (p.strides() != g.strides() || p.sizes() != g.sizes()) return false;
  return !buf || (buf->scalar_type() == at::kFloat && buf->strides() == p.strides() && buf->sizes() == p.sizes());
}

// The CPU forms: the staged values read back. SGD goes through ATen's fused CPU kernel (one pass
// per tensor instead of four ops; the loop's arithmetic to float rounding: the unit tests check),
// with the loop for what that kernel cannot take; Adam through torch::optim's per-tensor ops (on the CPU a
// foreach op is a loop of them, slower than writing it: bench/optimizer_step).
void sgd_on_host(torch::optim::Optimizer& optimizer, const torch::optim::SGDOptions& o, Live& l, const GroupScalars& s) {
  const double lr = s.lr.item<double>(), momentum = s.momentum.item<double>();
  std::vector<at::Tensor> fused_params, fused_grads, fused_buffers;
  for (std::size_t i = 0; i < l.params.size(); ++i) {
    at::Tensor* buf = o.momentum() != 0 ? &state_of<torch::optim::SGDParamState>(optimizer, l.params[i]).momentum_buffer() : nullptr;
    if (flat_alike(l.params[i], l.grads[i], buf)) {
      fused_params.push_back(l.params[i]);
      fused_grads.push_back(l.grads[i]);
      if (buf) fused_buffers.push_back(*buf);
      continue;
    }
    at::Tensor d = o.weight_decay() != 0 ? l.grads[i].add(l.params[i], o.weight_decay()) : l.grads[i];
    if (buf) {
      buf->mul_(momentum).add_(d);
      d = o.nesterov() ? d.add(*buf, momentum) : *buf;
    }
    l.params[i].add_(d, -lr);
  }
  // the buffers start as zeros (capturable), so the first step is m·0 + d = d, as is_first_step's
  if (!fused_params.empty()) {
    at::_fused_sgd_(fused_params, fused_grads, fused_buffers, o.weight_decay(), o.momentum() != 0 ? momentum : 0.0, lr,
                    /*dampening=*/0.0, o.nesterov(), /*maximize=*/false, /*is_first_step=*/false);
  }
}

template <bool decoupled, typename State, typename Options>
void adam_on_host(torch::optim::Optimizer& optimizer, const Options& o, Live& l, const GroupScalars& s) {
  const auto [beta1, beta2] = o.betas();
  const double lr = s.lr.item<double>(), t = s.step.add_(1).item<double>();
  const double correction1 = 1 - std::pow(beta1, t), correction2_sqrt = std::sqrt(1 - std::pow(beta2, t));
  for (std::size_t i = 0; i < l.params.size(); ++i) {
    at::Tensor& p = l.params[i];
    auto& st = state_of<State>(optimizer, p);
    if (decoupled && o.weight_decay() != 0) p.mul_(1 - lr * o.weight_decay());
    const at::Tensor grad = !decoupled && o.weight_decay() != 0 ? l.grads[i].add(p, o.weight_decay()) : l.grads[i];
    st.exp_avg().mul_(beta1).add_(grad, 1 - beta1);
    st.exp_avg_sq().mul_(beta2).addcmul_(grad, grad, 1 - beta2);
    p.addcdiv_(st.exp_avg(), (st.exp_avg_sq().sqrt() / correction2_sqrt).add_(o.eps()), -lr / correction1);
  }
}

// The device forms: foreach kernels reading only device tensors (capturable); `skip` (defined
// under a loss scaler) masks an overflowed step.
void sgd_on_device(torch::optim::Optimizer& optimizer, const torch::optim::SGDOptions& o, Live& l, const GroupScalars& s,
                   const at::Tensor& skip) {
  const bool masked = skip.defined();
  // d = g + wd·p; with momentum, buf = m·buf + d and d = d + m·buf (Nesterov) or buf; p −= lr·d
  std::vector<at::Tensor> d = o.weight_decay() != 0 ? at::_foreach_add(l.grads, l.params, o.weight_decay()) : l.grads;
  if (masked) zero_where(d, skip);
  if (o.momentum() != 0) {
    std::vector<at::Tensor> buffers;
    for (const auto& p : l.params) buffers.push_back(state_of<torch::optim::SGDParamState>(optimizer, p).momentum_buffer());
    at::_foreach_mul_(buffers, masked ? at::where(skip, 1.0, s.momentum) : s.momentum);  // a skipped step keeps buf
    at::_foreach_add_(buffers, d);
    d = o.nesterov() ? at::_foreach_add(d, at::_foreach_mul(buffers, s.momentum)) : buffers;
  }
  const at::Tensor step = masked ? at::where(skip, 0.0, s.lr.neg()) : s.lr.neg();
  at::_foreach_add_(l.params, at::_foreach_mul(d, step));
}

template <bool decoupled, typename State, typename Options>
void adam_on_device(torch::optim::Optimizer& optimizer, const Options& o, Live& l, const GroupScalars& s, const at::Tensor& skip) {
  const bool masked = skip.defined();
  const auto [beta1, beta2] = o.betas();
  std::vector<at::Tensor> exp_avg, exp_avg_sq;
  for (const auto& p : l.params) {
    auto& st = state_of<State>(optimizer, p);
    exp_avg.push_back(st.exp_avg());
    exp_avg_sq.push_back(st.exp_avg_sq());
  }
  if (masked) s.step.add_(skip.logical_not()); else s.step.add_(1);
  std::vector<at::Tensor> grads = !decoupled && o.weight_decay() != 0 ? at::_foreach_add(l.grads, l.params, o.weight_decay())
                                                                      : l.grads;
  if (masked) zero_where(grads, skip);
  if (decoupled && o.weight_decay() != 0) {  // p·(1 − lr·wd)
    const at::Tensor factor = (1 - s.lr * o.weight_decay()).to(at::kFloat);
    at::_foreach_mul_(l.params, masked ? at::where(skip, 1.0, factor) : factor);
  }
  // m = β1·m + (1 − β1)·g, v = β2·v + (1 − β2)·g²; a skipped step has g = 0 and keeps m and v
  if (masked) {
    at::_foreach_mul_(exp_avg, at::where(skip, 1.0, device_scalar(s.lr, beta1)));
    at::_foreach_mul_(exp_avg_sq, at::where(skip, 1.0, device_scalar(s.lr, beta2)));
  } else {
    at::_foreach_mul_(exp_avg, beta1);
    at::_foreach_mul_(exp_avg_sq, beta2);
  }
  at::_foreach_add_(exp_avg, grads, 1 - beta1);
  at::_foreach_addcmul_(exp_avg_sq, grads, grads, 1 - beta2);
  // p −= lr / (1 − β1^t) · m / (√v / √(1 − β2^t) + eps)
  const at::Tensor t = s.step.clamp_min(1);  // a first step that was skipped divides by nothing
  const at::Tensor correction1 = 1 - at::pow(beta1, t), correction2_sqrt = (1 - at::pow(beta2, t)).sqrt().to(at::kFloat);
  std::vector<at::Tensor> denominator = at::_foreach_sqrt(exp_avg_sq);
  at::_foreach_div_(denominator, correction2_sqrt);
  at::_foreach_add_(denominator, o.eps());
  const at::Tensor step_size = (s.lr / correction1).neg().to(at::kFloat);
  std::vector<at::Tensor> update = at::_foreach_div(exp_avg, denominator);
  at::_foreach_mul_(update, masked ? at::where(skip, 0.0, step_size) : step_size);
  at::_foreach_add_(l.params, update);
}

}  // namespace

ForeachSGD::ForeachSGD(const std::vector<torch::optim::OptimizerParamGroup>& groups, torch::optim::SGDOptions defaults)
    : torch::optim::SGD(groups, std::move(defaults)) {
  for (const auto& group : param_groups()) {
    const auto& o = static_cast<const torch::optim::SGDOptions&>(group.options());
    TORCH_CHECK(o.dampening() == 0, "ForeachSGD: dampening is not supported");
  }
}

at::Tensor ForeachSGD::step(LossClosure closure) { return staged_step(*this, closure); }

void ForeachSGD::stage() {
  ensure_scalars(scalars_, param_groups(), false, {});
  for (std::size_t g = 0; g < param_groups().size(); ++g) {
    const auto& group = param_groups()[g];
    const auto& o = static_cast<const torch::optim::SGDOptions&>(group.options());
    scalars_[g].lr.fill_(o.lr());
    scalars_[g].momentum.fill_(o.momentum());
    if (o.momentum() == 0) continue;
    for (const auto& p : group.params()) {
      if (!p.grad().defined() || state().count(p.unsafeGetTensorImpl())) continue;
      auto s = std::make_unique<torch::optim::SGDParamState>();
      s->momentum_buffer(at::zeros_like(p, at::MemoryFormat::Preserve));  // 0·m + g = PyTorch's first clone(g)
      state()[p.unsafeGetTensorImpl()] = std::move(s);
    }
  }
}

void ForeachSGD::apply(const at::Tensor& found_inf) {
  if (param_groups().empty()) return;
  apply_groups<torch::optim::SGDOptions>(*this, scalars_, host_scalars(param_groups().front().params().front()), found_inf,
                                         sgd_on_host, sgd_on_device);
}

template <typename Base, typename Options, typename State>
ForeachAdamBase<Base, Options, State>::ForeachAdamBase(const std::vector<torch::optim::OptimizerParamGroup>& groups,
                                                       Options defaults)
    : Base(groups, std::move(defaults)) {
  for (const auto& group : this->param_groups()) {
    TORCH_CHECK(!static_cast<const Options&>(group.options()).amsgrad(), "ForeachAdam: amsgrad is not supported");
  }
}

template <typename Base, typename Options, typename State>
at::Tensor ForeachAdamBase<Base, Options, State>::step(torch::optim::Optimizer::LossClosure closure) {
  return staged_step(*this, closure);
}

template <typename Base, typename Options, typename State>
void ForeachAdamBase<Base, Options, State>::stage() {
  auto& groups = this->param_groups();
  ensure_scalars(scalars_, groups, true, [&](std::size_t g) {  // a loaded checkpoint's count
    std::int64_t step = 0;
    for (const auto& p : groups[g].params()) {
      const auto found = this->state().find(p.unsafeGetTensorImpl());
      if (found != this->state().end()) step = std::max(step, static_cast<const State&>(*found->second).step());
    }
    return static_cast<double>(step);
  });
  for (std::size_t g = 0; g < groups.size(); ++g) {
    scalars_[g].lr.fill_(groups[g].options().get_lr());
    for (const auto& p : groups[g].params()) {
      if (!p.grad().defined() || this->state().count(p.unsafeGetTensorImpl())) continue;
      auto s = std::make_unique<State>();
      s->exp_avg(at::zeros_like(p, at::MemoryFormat::Preserve));
      s->exp_avg_sq(at::zeros_like(p, at::MemoryFormat::Preserve));
      this->state()[p.unsafeGetTensorImpl()] = std::move(s);
    }
  }
}

template <typename Base, typename Options, typename State>
void ForeachAdamBase<Base, Options, State>::apply(const at::Tensor& found_inf) {
  constexpr bool decoupled = std::is_same_v<Options, torch::optim::AdamWOptions>;
  if (this->param_groups().empty()) return;
  apply_groups<Options>(*this, scalars_, this->host_scalars(this->param_groups().front().params().front()), found_inf,
                        adam_on_host<decoupled, State, Options>, adam_on_device<decoupled, State, Options>);
}

template <typename Base, typename Options, typename State>
void ForeachAdamBase<Base, Options, State>::write_back() {
  for (std::size_t g = 0; g < scalars_.size() && g < this->param_groups().size(); ++g) {
    const auto step = static_cast<std::int64_t>(scalars_[g].step.template item<double>());  // checkpoints only
    for (const auto& p : this->param_groups()[g].params()) {
      const auto found = this->state().find(p.unsafeGetTensorImpl());
      if (found != this->state().end()) static_cast<State&>(*found->second).step(step);
    }
  }
}

template class ForeachAdamBase<torch::optim::Adam, torch::optim::AdamOptions, torch::optim::AdamParamState>;
template class ForeachAdamBase<torch::optim::AdamW, torch::optim::AdamWOptions, torch::optim::AdamWParamState>;

}  // namespace libreyolo::train
