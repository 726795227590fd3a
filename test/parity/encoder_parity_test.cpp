// Parity of our hybrid encoder with libreyolo 1.6.0's RT-DETR and D-FINE ones
// (make_encoder_reference.py): its state dict loads by name (strict), and on the same backbone
// maps the eval outputs, the train-mode outputs, the gradients of every parameter and of the input
// maps, and the updated running statistics equal the reference's (RT-DETR-r18's widths and r50's
// with a fixed eval size; D-FINE-n's two levels and D-FINE-s's three, with a fixed eval size).
//   encoder_parity_test DIR
#include "models/detr_common/hybrid_encoder.h"
#include "models/safetensors.h"
#include "module_parity.h"

#include <ATen/ATen.h>
#include <fmt/core.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

using namespace libreyolo::models;
using parity::Comparison;
using parity::Tensors;
using parity::with_prefix;

namespace {

bool run_case(const Tensors& io, const std::string& name) {
  const at::Tensor config = io.at(name + ".config");
  const auto value = [&](std::int64_t i) { return config[i].item<std::int64_t>(); };
  detr::HybridEncoderOptions options;
  options.blocks = value(0) != 0 ? detr::FusionBlocks::elan : detr::FusionBlocks::csp_rep;
  options.hidden = static_cast<int>(value(1));
  options.feedforward = static_cast<int>(value(2));
  options.expansion = static_cast<double>(value(3)) / 100;
  options.depth_mult = static_cast<double>(value(4)) / 100;
  options.in_channels.clear();
  for (std::int64_t i = 5; i < config.numel(); ++i) options.in_channels.push_back(static_cast<int>(value(i)));
  const int levels = static_cast<int>(options.in_channels.size());
  detr::HybridEncoder model(options);
  load_state_dict(*model, with_prefix(io, name + ".state."));
  std::vector<at::Tensor> inputs;
  for (int i = 0; i < levels; ++i) inputs.push_back(io.at(fmt::format("{}.input{}", name, i)).clone().requires_grad_());
  Comparison eval, train, grads, input_grads, stats;
  model->eval();
  {
    torch::NoGradGuard no_grad;
    const auto outs = model->forward(inputs);
    for (std::size_t i = 0; i < outs.size(); ++i) eval.add(outs[i], io.at(fmt::format("{}.eval{}", name, i)));
  }
  model->train();
  const auto outs = model->forward(inputs);
  at::Tensor total = at::zeros({});
  for (std::size_t i = 0; i < outs.size(); ++i) {
    train.add(outs[i].detach(), io.at(fmt::format("{}.train{}", name, i)));
    total = total + (outs[i] * io.at(fmt::format("{}.weights{}", name, i))).sum();
  }
  total.backward();
  Tensors reference_grads = with_prefix(io, name + ".grad.");
  for (int i = 0; i < levels; ++i) {
    const std::string key = fmt::format("input{}", i);
    input_grads.add(inputs[static_cast<std::size_t>(i)].grad(), reference_grads.at(key));
    reference_grads.erase(key);
  }
  parity::compare_gradients(*model, reference_grads, grads);
  for (const auto& [key, value] : with_prefix(io, name + ".after.")) stats.add(model->named_buffers()[key], value);
  const bool ok = eval.worst <= 1e-5 && train.worst <= 1e-5 && grads.worst <= 1e-4 && input_grads.worst <= 1e-4 &&
                  stats.worst <= 1e-6;
  fmt::print("{}: {} hybrid encoder over {} channels, hidden {}, expansion {}, depth {}: eval {:.2g}, train {:.2g}, {} gradients {:.2g}, input "
             "gradients {:.2g}, statistics {:.2g} (max rel. diff); {} of {} tensors bit-identical: {}\n",
             name, options.blocks == detr::FusionBlocks::elan ? "D-FINE's" : "RT-DETR's", fmt::join(options.in_channels, "/"),
             options.hidden, options.expansion, options.depth_mult, eval.worst, train.worst, grads.compared, grads.worst,
             input_grads.worst, stats.worst, eval.exact + train.exact + grads.exact + input_grads.exact + stats.exact,
             eval.compared + train.compared + grads.compared + input_grads.compared + stats.compared, ok ? "ok" : "MISMATCH");
  return ok;
}

}  // namespace

int main(int argc, char** argv) { return parity::run_cases(argc, argv, "encoder.safetensors", "config", "encoder", run_case); }
