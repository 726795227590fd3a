// Parity of our whole RT-DETR network with libreyolo 1.6.0's RTDETRModel (make_rtdetr_reference.py),
// for r18 from scratch, r50m as from a checkpoint (frozen stem and backbone norms, eval at decoder
// layer 2) and r101 (a 384-wide encoder): the state dict loads by name (strict), and on the same
// images the eval outputs, every train-mode output level with the reference's denoising draws, and
// the gradients of every trainable parameter equal the reference's, and so does every term of the
// loss on those outputs (the Hungarian matching of each level included).
//   rtdetr_parity_test DIR
#include "models/detr/rtdetr_model.h"
#include "models/safetensors.h"
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
  const at::Tensor counts = io.at("counts");
  const detr::DetrTargets targets{io.at("classes"), io.at("boxes"),
                                  std::vector<std::int64_t>(counts.data_ptr<std::int64_t>(), counts.data_ptr<std::int64_t>() + counts.numel())};
  Comparison eval, train, grads;
  model->eval();
  {
    torch::NoGradGuard no_grad;
    const auto out = model->forward(images);
    eval.add(out.last.logits, io.at("eval.logits"));
    eval.add(out.last.boxes, io.at("eval.boxes"));
  }
  model->train();
  detr::DenoisingOptions denoising;
  denoising.classes = options.classes;
  denoising.queries = options.queries;
  const auto queries = detr::make_denoising_queries(
      targets, denoising, {io.at("noise.label_uniform"), io.at("noise.random_label"), io.at("noise.sign_bit"), io.at("noise.box_uniform")});
  const auto out = model->forward(images, &queries);
  std::vector<std::pair<std::string, const detr::DetrLevel*>> levels{{"last", &out.last}};
  for (std::size_t i = 0; i < out.auxiliary.size(); ++i) levels.emplace_back(fmt::format("aux{}", i), &out.auxiliary[i]);
  for (std::size_t i = 0; i < out.denoising.size(); ++i) levels.emplace_back(fmt::format("dn{}", i), &out.denoising[i]);
  std::size_t expected_levels = 0;
  for (const auto& [key, value] : io) expected_levels += key.starts_with("train.") && key.ends_with(".pred_logits");
  at::Tensor total = at::zeros({});
  for (const auto& [label, level] : levels) {
    for (const auto& [key, tensor] : {std::pair{"pred_logits", level->logits}, std::pair{"pred_boxes", level->boxes}}) {
      const std::string stem = fmt::format("{}.{}", label, key);
      if (!io.count("train." + stem)) {
        train.missing();
        continue;
      }
      train.add(tensor.detach(), io.at("train." + stem));
      total = total + (tensor * io.at("weights." + stem)).sum();
    }
  }
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
  const bool ok = levels.size() == expected_levels && eval.worst <= 1e-5 && train.worst <= 1e-5 && loss.worst <= 1e-5 &&
                  grads.worst <= 1e-4;
  fmt::print("{}: RT-DETR-{} ({}): eval {:.2g}, {} train levels {:.2g}, {} loss terms {:.2g}, {} gradients {:.2g} (max rel. "
             "diff); {} of {} tensors bit-identical: {}\n",
             name, options.size, options.scratch ? "from scratch" : "as from a checkpoint", eval.worst, levels.size(),
             train.worst, loss.compared, loss.worst, grads.compared, grads.worst, eval.exact + train.exact + loss.exact + grads.exact,
             eval.compared + train.compared + loss.compared + grads.compared, ok ? "ok" : "MISMATCH");
  return ok;
}

}  // namespace

int main(int argc, char** argv) { return parity::run_cases(argc, argv, "rtdetr.safetensors", "config", "rtdetr", run_case); }
