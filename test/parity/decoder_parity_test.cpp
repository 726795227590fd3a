// Parity of our RT-DETR decoder with libreyolo 1.6.0's RTDETRTransformer (make_decoder_reference.py):
// its state dict loads by name (strict); on the same encoder maps the eval outputs, and in train
// mode, with the reference's denoising draws, every output level (the layers, the encoder's
// proposals, the denoising queries per layer), the gradients of every parameter and the updated
// running statistics equal the reference's.
//   decoder_parity_test DIR
#include "models/detr_common/rtdetr_decoder.h"
#include "models/safetensors.h"
#include "detr_levels.h"
#include "module_parity.h"

#include <ATen/ATen.h>
#include <fmt/core.h>
#include <torch/torch.h>

using namespace libreyolo::models;
using parity::Comparison;
using parity::Tensors;
using parity::with_prefix;

namespace {

bool run_case(const Tensors& all, const std::string& name) {
  const Tensors io = with_prefix(all, name + ".");
  detr::RtdetrDecoderOptions options;
  options.classes = 12;
  options.queries = 30;
  options.layers = 3;
  detr::RtdetrDecoder model(options);
  load_state_dict(*model, with_prefix(io, "state."));
  std::vector<at::Tensor> features;
  for (int i = 0; i < 3; ++i) features.push_back(io.at(fmt::format("input{}", i)));
  Comparison eval, train, grads, stats;
  detr::DenoisingOptions denoising_options;
  denoising_options.classes = options.classes;
  denoising_options.queries = options.queries;
  denoising_options.denoising = 20;
  std::int64_t denoising_queries = 0;
  const auto out = parity::eval_then_train(model, features, io, denoising_options, eval, &denoising_queries);
  std::size_t level_count = 0;
  const at::Tensor total = parity::compare_levels(out, io, train, level_count);
  total.backward();
  parity::compare_gradients(*model, with_prefix(io, "grad."), grads);
  for (const auto& [key, value] : with_prefix(io, "after.")) stats.add(model->named_buffers()[key], value);
  const bool ok = eval.worst <= 1e-5 && train.worst <= 1e-5 && grads.worst <= 1e-4 &&
                  stats.worst <= 1e-6;
  fmt::print("{}: decoder, {} layers, {} queries, {} denoising queries: eval {:.2g}, {} train levels {:.2g}, {} gradients "
             "{:.2g}, statistics {:.2g} (max rel. diff); {} of {} tensors bit-identical: {}\n",
             name, options.layers, options.queries, denoising_queries, eval.worst, level_count, train.worst, grads.compared,
             grads.worst, stats.worst, eval.exact + train.exact + grads.exact + stats.exact,
             eval.compared + train.compared + grads.compared + stats.compared, ok ? "ok" : "MISMATCH");
  return ok;
}

}  // namespace

int main(int argc, char** argv) { return parity::run_cases(argc, argv, "decoder.safetensors", "counts", "decoder", run_case); }
