// Parity of our HGNetv2 with libreyolo 1.6.0's two (make_hgnetv2_reference.py): RT-DETR's (l from
// scratch; x as from weights, its stem and norms frozen) and D-FINE's (B0 with the learnable affine
// and two levels, as D-FINE-n from weights; B2 from scratch). Its state dict loads by name
// (strict), and on the same input the eval outputs, the train-mode outputs, the gradient of every
// trainable parameter and the updated running statistics equal the reference's.
//   hgnetv2_parity_test DIR
#include "models/detr_common/hgnetv2.h"
#include "models/safetensors.h"
#include "module_parity.h"

#include <ATen/ATen.h>
#include <fmt/core.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include <array>

using namespace libreyolo::models;

namespace {

using parity::Comparison;
using parity::Tensors;
using parity::with_prefix;

bool run_case(const Tensors& io, const std::string& name) {
  static const std::array<const char*, 10> archs{"B0", "B1", "B2", "B3", "B4", "B5", "B6", "L", "X", "H"};
  const at::Tensor config = io.at(name + ".config");
  const auto value = [&](int i) { return config[i].item<std::int64_t>(); };
  detr::HgnetOptions options;
  options.layout = value(0) != 0 ? detr::HgnetLayout::dfine : detr::HgnetLayout::rtdetr;
  options.arch = archs.at(static_cast<std::size_t>(value(1)));
  options.learnable_affine = value(2) != 0;
  options.freeze_stem = value(3) != 0;
  options.frozen_stages = static_cast<int>(value(4));
  options.freeze_norm = value(5) != 0;
  options.returned.clear();
  for (int stage = 0; stage < 4; ++stage) {
    if ((value(6) >> stage) & 1) options.returned.push_back(stage);
  }
  detr::HgnetV2 model(options);
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
  for (const auto& [key, tensor] : with_prefix(io, name + ".after.")) stats.add(model->named_buffers()[key], tensor);
  const bool ok = eval.compared == options.returned.size() && eval.worst <= 1e-5 && train.worst <= 1e-5 &&
                  grads.worst <= 1e-4 && stats.worst <= 1e-6;
  fmt::print("{}: HGNetv2-{} ({} layout, affine {}, stages {}, stem frozen {}, norms frozen {}): eval {:.2g}, train {:.2g}, {} "
             "gradients {:.2g}, statistics {:.2g} (max rel. diff); {} of {} tensors bit-identical: {}\n",
             name, options.arch, options.layout == detr::HgnetLayout::dfine ? "D-FINE" : "RT-DETR", options.learnable_affine,
             options.returned, options.freeze_stem, options.freeze_norm, eval.worst, train.worst, grads.compared, grads.worst,
             stats.worst, eval.exact + train.exact + grads.exact + stats.exact,
             eval.compared + train.compared + grads.compared + stats.compared, ok ? "ok" : "MISMATCH");
  return ok;
}

}  // namespace

int main(int argc, char** argv) { return parity::run_cases(argc, argv, "hgnetv2.safetensors", "config", "hgnetv2", run_case); }
