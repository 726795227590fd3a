// Parity of our whole RT-DETR network with libreyolo 1.6.0's RTDETRModel (make_rtdetr_reference.py),
// for r18 from scratch, r50m as from a checkpoint (frozen stem and backbone norms, eval at decoder
// layer 2), r101 (a 384-wide encoder) and l (HGNetv2-L, as from a checkpoint): the state dict loads by name (strict), and on the same
// images the eval outputs, every train-mode output level with the reference's denoising draws, and
// the gradients of every trainable parameter equal the reference's, and so does every term of the
// loss on those outputs (the Hungarian matching of each level included).
//   rtdetr_parity_test DIR
#include "models/rtdetr/model.h"
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
  const at::Tensor config = io.at("config");
  detr::RtdetrOptions options;
  options.size = detr::rtdetr_sizes().at(static_cast<std::size_t>(config[0].item<std::int64_t>()));
  options.scratch = config[1].item<std::int64_t>() != 0;
  options.classes = 7;
  options.queries = 20;
  detr::RtdetrModel model(options);
  load_state_dict(*model, with_prefix(io, "state."));
  const at::Tensor& images = io.at("images");
  const detr::DetrTargets targets = parity::targets_of(io);
  Comparison eval, train, grads;
  detr::DenoisingOptions denoising;
  denoising.classes = options.classes;
  denoising.queries = options.queries;
  const auto out = parity::eval_then_train(model, images, io, denoising, eval);
  std::size_t level_count = 0;
  const at::Tensor total = parity::compare_levels(out, io, train, level_count);
  Comparison loss;
  {
    torch::NoGradGuard no_grad;
    detr::CriterionOptions criterion;
    criterion.classes = options.classes;
    const Tensors expected = with_prefix(io, "loss.");
    auto terms = detr::detr_loss_terms(out, targets, criterion);
    at::Tensor sum;
    for (const auto& [key, value] : terms) sum = sum.defined() ? sum + value : value;
    terms.emplace_back("total_loss", sum);
    for (const auto& [key, value] : terms) {
      if (expected.count(key)) loss.add(value, expected.at(key));
      else loss.missing();
    }
    if (terms.size() != expected.size()) loss.missing();
  }
  total.backward();
  parity::compare_gradients(*model, with_prefix(io, "grad."), grads);
  const bool ok = eval.worst <= 1e-5 && train.worst <= 1e-5 && loss.worst <= 1e-5 &&
                  grads.worst <= 1e-4;
  fmt::print("{}: RT-DETR-{} ({}): eval {:.2g}, {} train levels {:.2g}, {} loss terms {:.2g}, {} gradients {:.2g} (max rel. "
             "diff); {} of {} tensors bit-identical: {}\n",
             name, options.size, options.scratch ? "from scratch" : "as from a checkpoint", eval.worst, level_count,
             train.worst, loss.compared, loss.worst, grads.compared, grads.worst, eval.exact + train.exact + loss.exact + grads.exact,
             eval.compared + train.compared + loss.compared + grads.compared, ok ? "ok" : "MISMATCH");
  return ok;
}

}  // namespace

int main(int argc, char** argv) { return parity::run_cases(argc, argv, "rtdetr.safetensors", "config", "rtdetr", run_case); }
