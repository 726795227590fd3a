// Parity of our PResNet with libreyolo 1.6.0's (make_presnet_reference.py): its state dict loads
// by name (strict), and on the same input the eval outputs, the train-mode outputs, the gradient of
// every trainable parameter and the updated running statistics equal the reference's, for depths
// 18, 34, 50 (frozen norms) and 101.
//   presnet_parity_test DIR
#include "models/detr/presnet.h"
#include "models/safetensors.h"

#include <ATen/ATen.h>
#include <fmt/core.h>
#include <torch/torch.h>

#include <algorithm>
#include <exception>
#include <map>

using namespace libreyolo::models;

namespace {

using Tensors = std::map<std::string, at::Tensor>;

double difference(const at::Tensor& ours, const at::Tensor& reference) {
  if (ours.sizes() != reference.sizes()) return 1e30;
  return ((ours.to(at::kDouble) - reference.to(at::kDouble)).abs() / reference.to(at::kDouble).abs().clamp_min(1)).max().item<double>();
}

Tensors with_prefix(const Tensors& io, const std::string& prefix) {
  Tensors out;
  for (const auto& [key, value] : io) {
    if (key.starts_with(prefix)) out[key.substr(prefix.size())] = value;
  }
  return out;
}

bool run_case(const Tensors& io, const std::string& name) {
  const at::Tensor config = io.at(name + ".config");
  detr::PResNetOptions options;
  options.depth = static_cast<int>(config[0].item<std::int64_t>());
  options.freeze_at = static_cast<int>(config[1].item<std::int64_t>());
  options.freeze_norm = config[2].item<std::int64_t>() != 0;
  detr::PResNet model(options);
  load_state_dict(*model, with_prefix(io, name + ".state."));
  const at::Tensor& input = io.at(name + ".input");
  double eval_diff = 0, train_diff = 0, grad_diff = 0, stats_diff = 0;
  std::size_t exact = 0, compared = 0;
  const auto note = [&](double& worst, const at::Tensor& ours, const at::Tensor& reference) {
    worst = std::max(worst, difference(ours, reference));
    exact += at::equal(ours, reference);
    ++compared;
  };
  model->eval();
  {
    torch::NoGradGuard no_grad;
    const auto outs = model->forward(input);
    for (std::size_t i = 0; i < outs.size(); ++i) note(eval_diff, outs[i], io.at(fmt::format("{}.eval{}", name, i)));
  }
  model->train();
  const auto outs = model->forward(input);
  at::Tensor total = at::zeros({});
  for (std::size_t i = 0; i < outs.size(); ++i) {
    note(train_diff, outs[i].detach(), io.at(fmt::format("{}.train{}", name, i)));
    total = total + (outs[i] * io.at(fmt::format("{}.weights{}", name, i))).sum();
  }
  total.backward();
  const Tensors grads = with_prefix(io, name + ".grad.");
  std::size_t trainable = 0;
  for (const auto& item : model->named_parameters()) {
    if (!item.value().requires_grad()) continue;
    ++trainable;
    const auto it = grads.find(item.key());
    if (it == grads.end() || !item.value().grad().defined()) {
      grad_diff = 1e30;
      continue;
    }
    note(grad_diff, item.value().grad(), it->second);
  }
  for (const auto& [key, value] : with_prefix(io, name + ".after.")) note(stats_diff, model->named_buffers()[key], value);
  const bool ok = trainable == grads.size() && eval_diff <= 1e-5 && train_diff <= 1e-5 && grad_diff <= 1e-4 && stats_diff <= 1e-6;
  fmt::print("{}: PResNet-{} (freeze_at {}, freeze_norm {}): eval {:.2g}, train {:.2g}, {} gradients {:.2g}, statistics "
             "{:.2g} (max rel. diff); {} of {} tensors bit-identical: {}\n",
             name, options.depth, options.freeze_at, options.freeze_norm, eval_diff, train_diff, trainable, grad_diff,
             stats_diff, exact, compared, ok ? "ok" : "MISMATCH");
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    fmt::print(stderr, "usage: presnet_parity_test DIR\n");
    return 2;
  }
  try {
    const auto io = read_safetensors(std::string(argv[1]) + "/presnet.safetensors");
    bool ok = true;
    int cases = 0;
    for (; io.count(fmt::format("case{}.config", cases)); ++cases) ok = run_case(io, fmt::format("case{}", cases)) && ok;
    if (cases == 0) {
      fmt::print("FAIL: no cases in {}/presnet.safetensors\n", argv[1]);
      return 1;
    }
    fmt::print("{}\n", ok ? "presnet parity: OK" : "presnet parity: FAILED");
    return ok ? 0 : 1;
  } catch (const std::exception& error) {
    fmt::print("FAIL: {}\n", error.what());
    return 1;
  }
}
