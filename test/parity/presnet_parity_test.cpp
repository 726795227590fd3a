// Parity of our PResNet with libreyolo 1.6.0's (make_presnet_reference.py): its state dict loads
// by name (strict), and on the same input the eval outputs, the train-mode outputs, the gradient of
// every trainable parameter and the updated running statistics equal the reference's, for depths
// 18, 34, 50 (frozen norms) and 101.
//   presnet_parity_test DIR
#include "models/detr_common/presnet.h"
#include "models/safetensors.h"
#include "module_parity.h"

#include <ATen/ATen.h>
#include <fmt/core.h>
#include <torch/torch.h>

#include <algorithm>
#include <exception>
#include <map>

using namespace libreyolo::models;

namespace {

using parity::Comparison;
using parity::Tensors;
using parity::with_prefix;

bool run_case(const Tensors& io, const std::string& name) {
  const at::Tensor config = io.at(name + ".config");
  detr::PResNetOptions options;
  options.depth = static_cast<int>(config[0].item<std::int64_t>());
  options.freeze_at = static_cast<int>(config[1].item<std::int64_t>());
  options.freeze_norm = config[2].item<std::int64_t>() != 0;
  detr::PResNet model(options);
  load_state_dict(*model, with_prefix(io, name + ".state."));
  const at::Tensor& input = io.at(name + ".input");
  Comparison eval, train, grads, stats;
  model->eval();
  {
    torch::NoGradGuard no_grad;
    const auto outs = model->forward(input);
    for (std::size_t i = 0; i < outs.size(); ++i) eval.add(outs[i], io.at(fmt::format("{}.eval{}", name, i)));
  }
  model->train();
  const auto outs = model->forward(input);
  at::Tensor total = at::zeros({});
  for (std::size_t i = 0; i < outs.size(); ++i) {
    train.add(outs[i].detach(), io.at(fmt::format("{}.train{}", name, i)));
    total = total + (outs[i] * io.at(fmt::format("{}.weights{}", name, i))).sum();
  }
  total.backward();
  parity::compare_gradients(*model, with_prefix(io, name + ".grad."), grads);
  for (const auto& [key, value] : with_prefix(io, name + ".after.")) stats.add(model->named_buffers()[key], value);
  const bool ok = eval.worst <= 1e-5 && train.worst <= 1e-5 && grads.worst <= 1e-4 && stats.worst <= 1e-6;
  fmt::print("{}: PResNet-{} (freeze_at {}, freeze_norm {}): eval {:.2g}, train {:.2g}, {} gradients {:.2g}, statistics "
             "{:.2g} (max rel. diff); {} of {} tensors bit-identical: {}\n",
             name, options.depth, options.freeze_at, options.freeze_norm, eval.worst, train.worst, grads.compared, grads.worst,
             stats.worst, eval.exact + train.exact + grads.exact + stats.exact,
             eval.compared + train.compared + grads.compared + stats.compared, ok ? "ok" : "MISMATCH");
  return ok;
}

}  // namespace

int main(int argc, char** argv) { return parity::run_cases(argc, argv, "presnet.safetensors", "config", "presnet", run_case); }
