// Parity of our whole D-FINE network with libreyolo 1.6.0's (make_dfine_reference.py), for n as from
// a checkpoint (two levels, the learnable affine, the stem frozen) and s from scratch, of DEIM-n
// (SiLU heads, MAL) and of RT-DETRv4-s (D-FINE's with SiLU heads, MAL) as from a checkpoint: the state
// dict loads by name (strict: the anchors, up and reg_scale included), and on the same images the
// eval outputs, every training output (each layer's logits, boxes, edge distributions and reference
// boxes, the pre boxes, the encoder's proposals, the denoising queries' with the reference's draws),
// every term of the set loss on those outputs (each level's Hungarian matching, the union of
// matches, FGL and DDF included) and the gradients of every trainable parameter equal the reference's.
//   dfine_parity_test DIR
#include "models/detr_common/dfine_criterion.h"
#include "models/detr_common/dfine_model.h"
#include "models/safetensors.h"
#include "detr_levels.h"
#include "module_parity.h"

#include <torch/csrc/autograd/autograd.h>

#include <array>

using parity::Comparison;
using parity::Tensors;
using parity::with_prefix;
using namespace libreyolo::models;

namespace {

bool run_case(const Tensors& all, const std::string& name) {
  const Tensors io = with_prefix(all, name + ".");
  const at::Tensor config = io.at("config");
  detr::DfineOptions options;
  options.size = detr::dfine_sizes().at(static_cast<std::size_t>(config[0].item<std::int64_t>()));
  options.scratch = config[1].item<std::int64_t>() != 0;
  options.variant = static_cast<detr::DfineVariant>(config[2].item<std::int64_t>());
  options.classes = 7;
  options.queries = 20;
  detr::DfineModel model(options);
  load_state_dict(*model, with_prefix(io, "state."));
  Comparison eval, train, grads;
  detr::DenoisingOptions denoising;
  denoising.classes = options.classes;
  denoising.queries = options.queries;
  denoising.mirror_negative = true;
  const detr::DfineOutputs out = parity::eval_then_train(model, io.at("images"), io, denoising, eval);
  // every output level, in the reference script's order, into one weighted sum
  std::vector<std::pair<std::string, const detr::FdrLevel*>> fdr{{"last", &out.last}};
  for (std::size_t i = 0; i < out.auxiliary.size(); ++i) fdr.emplace_back(fmt::format("aux{}", i), &out.auxiliary[i]);
  const detr::FdrLevel pre{out.pre.logits, out.pre.boxes, {}, {}}, encoder{out.encoder.logits, out.encoder.boxes, {}, {}};
  const detr::FdrLevel dnpre{out.denoising_pre.logits, out.denoising_pre.boxes, {}, {}};
  fdr.emplace_back("pre", &pre);
  fdr.emplace_back("enc0", &encoder);
  for (std::size_t i = 0; i < out.denoising.size(); ++i) fdr.emplace_back(fmt::format("dn{}", i), &out.denoising[i]);
  if (!out.denoising.empty()) fdr.emplace_back("dnpre", &dnpre);
  at::Tensor total = at::zeros({});
  std::size_t compared = 0;
  for (const auto& [label, level] : fdr) {
    for (const auto& [key, tensor] : {std::pair{"pred_logits", level->logits}, std::pair{"pred_boxes", level->boxes},
                                      std::pair{"pred_corners", level->corners}, std::pair{"ref_points", level->references}}) {
      const std::string stem = fmt::format("{}.{}", label, key);
      if (!tensor.defined()) {
        if (io.count("train." + stem)) train.missing();  // the reference has an output we lack
        continue;
      }
      if (!io.count("train." + stem)) {
        train.missing();
        continue;
      }
      train.add(tensor.detach(), io.at("train." + stem));
      total = total + (tensor * io.at("weights." + stem)).sum();
      ++compared;
    }
  }
  std::size_t expected = 0;
  for (const auto& [key, value] : io) expected += key.starts_with("train.");
  if (expected != compared) train.missing();
  Comparison loss, loss_grads;
  {
    detr::DfineCriterionOptions criterion;
    criterion.classes = options.classes;
    criterion.mal = options.variant != detr::DfineVariant::dfine;
    const Tensors expected = with_prefix(io, "loss.");
    auto terms = detr::dfine_loss_terms(out, parity::targets_of(io), model->decoder()->up(), model->decoder()->reg_scale(), criterion);
    at::Tensor sum;
    for (const auto& [key, value] : terms) sum = sum.defined() ? sum + value : value;
    terms.emplace_back("total_loss", sum);
    for (const auto& [key, value] : terms) {
      if (expected.count(key)) {
        loss.add(value, expected.at(key));
      } else {
        fmt::print("  loss term {} is not the reference's\n", key);
        loss.missing();
      }
    }
    if (terms.size() != expected.size()) loss.missing();
    // the loss's gradient with respect to every output the reference differentiates
    std::vector<at::Tensor> inputs, references;
    for (const auto& [label, level] : fdr) {
      for (const auto& [key, tensor] : {std::pair{"pred_logits", level->logits}, std::pair{"pred_boxes", level->boxes},
                                        std::pair{"pred_corners", level->corners}}) {
        const std::string stem = fmt::format("lossgrad.{}.{}", label, key);
        if (!tensor.defined()) continue;
        if (!io.count(stem)) {
          loss_grads.missing();
          continue;
        }
        inputs.push_back(tensor);
        references.push_back(io.at(stem));
      }
    }
    const auto gradients = torch::autograd::grad({sum}, inputs, {}, /*retain_graph=*/true, /*create_graph=*/false, /*allow_unused=*/true);
    for (std::size_t i = 0; i < gradients.size(); ++i) {
      loss_grads.add(gradients[i].defined() ? gradients[i] : at::zeros_like(inputs[i]), references[i]);
    }
    std::size_t expected_grads = 0;
    for (const auto& [key, value] : io) expected_grads += key.starts_with("lossgrad.");
    if (expected_grads != inputs.size()) loss_grads.missing();
  }
  total.backward();
  parity::compare_gradients(*model, with_prefix(io, "grad."), grads);
  const bool ok = eval.worst <= 1e-5 && train.worst <= 1e-5 && loss.worst <= 1e-5 && loss_grads.worst <= 1e-5 && grads.worst <= 1e-4;
  fmt::print("{}: {}-{} ({}): eval {:.2g}, {} training outputs {:.2g}, {} loss terms {:.2g}, {} loss gradients {:.2g}, {} "
             "gradients {:.2g} (max rel. diff); {} of {} tensors bit-identical: {}\n",
             name, std::array{"D-FINE", "DEIM", "RT-DETRv4"}.at(static_cast<std::size_t>(options.variant)), options.size, options.scratch ? "from scratch" : "as from a checkpoint", eval.worst,
             train.compared, train.worst, loss.compared, loss.worst, loss_grads.compared, loss_grads.worst, grads.compared, grads.worst,
             eval.exact + train.exact + loss.exact + loss_grads.exact + grads.exact,
             eval.compared + train.compared + loss.compared + loss_grads.compared + grads.compared, ok ? "ok" : "MISMATCH");
  return ok;
}

}  // namespace

int main(int argc, char** argv) { return parity::run_cases(argc, argv, "dfine.safetensors", "config", "dfine", run_case); }
