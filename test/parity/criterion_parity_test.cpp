// Parity of our RT-DETR set loss with libreyolo 1.6.0's (written by make_criterion_reference.py):
// on the same decoder, encoder and denoising outputs, every weighted term (main, _aux_<i>, _dn_<i>;
// the matcher's assignment included) and the gradient of the total with respect to every output.
//   criterion_parity_test DIR
#include "models/detr_common/criterion.h"
#include "models/safetensors.h"
#include "module_parity.h"

#include <ATen/ATen.h>
#include <fmt/core.h>

#include <algorithm>
#include <exception>
#include <map>
#include <vector>

using namespace libreyolo::models;

namespace {

using parity::difference;
using parity::Tensors;

std::vector<std::int64_t> values(const at::Tensor& tensor) {
  const at::Tensor flat = tensor.to(at::kLong).contiguous();
  return {flat.const_data_ptr<std::int64_t>(), flat.const_data_ptr<std::int64_t>() + flat.numel()};
}

detr::DetrLevel level_of(const Tensors& io, const std::string& prefix) {
  return {io.at(prefix + ".pred_logits").clone().requires_grad_(), io.at(prefix + ".pred_boxes").clone().requires_grad_()};
}

bool run_case(const Tensors& io, const std::string& name) {
  detr::DetrOutputs outputs;
  std::vector<std::pair<std::string, detr::DetrLevel*>> leaves;
  outputs.last = level_of(io, name + ".last");
  for (int i = 0; io.count(fmt::format("{}.aux{}.pred_logits", name, i)); ++i) outputs.auxiliary.push_back(level_of(io, fmt::format("{}.aux{}", name, i)));
  for (int i = 0; io.count(fmt::format("{}.dn{}.pred_logits", name, i)); ++i) outputs.denoising.push_back(level_of(io, fmt::format("{}.dn{}", name, i)));
  const detr::DetrTargets targets{io.at(name + ".classes"), io.at(name + ".target_boxes"), values(io.at(name + ".counts"))};
  if (!outputs.denoising.empty()) {
    outputs.denoising_match.groups = io.at(name + ".dn_groups").item<std::int64_t>();
    for (std::size_t i = 0; i < targets.counts.size(); ++i) {
      outputs.denoising_match.positive_queries.push_back(io.at(fmt::format("{}.dn_positive{}", name, i)));
    }
  }
  detr::CriterionOptions options;
  options.classes = outputs.last.logits.size(-1);
  auto terms = detr::detr_loss_terms(outputs, targets, options);
  at::Tensor total;
  for (const auto& [key, value] : terms) total = total.defined() ? total + value : value;
  terms.emplace_back("total_loss", total);
  total.backward();
  double worst_term = 0, worst_grad = 0;
  int exact = 0, expected_terms = 0;
  bool ok = true;
  for (const auto& [key, tensor] : io) {
    if (key.starts_with(name + ".term.")) ++expected_terms;
  }
  for (const auto& [key, value] : terms) {
    const auto it = io.find(name + ".term." + key);
    if (it == io.end()) {
      fmt::print("  {}: the reference has no term {}\n", name, key);
      ok = false;
      continue;
    }
    const double d = difference(value.detach(), it->second);
    exact += at::equal(value.detach().reshape({}), it->second.reshape({}));
    worst_term = std::max(worst_term, d);
  }
  std::vector<std::pair<std::string, const detr::DetrLevel*>> levels{{"last", &outputs.last}};
  for (std::size_t i = 0; i < outputs.auxiliary.size(); ++i) levels.emplace_back(fmt::format("aux{}", i), &outputs.auxiliary[i]);
  for (std::size_t i = 0; i < outputs.denoising.size(); ++i) levels.emplace_back(fmt::format("dn{}", i), &outputs.denoising[i]);
  for (const auto& [label, level] : levels) {
    for (const auto& [key, tensor] : {std::pair{"pred_logits", level->logits}, std::pair{"pred_boxes", level->boxes}}) {
      const at::Tensor grad = tensor.grad().defined() ? tensor.grad() : at::zeros_like(tensor);
      worst_grad = std::max(worst_grad, difference(grad, io.at(fmt::format("{}.{}.{}.grad", name, label, key))));
    }
  }
  ok = ok && static_cast<int>(terms.size()) == expected_terms && worst_term <= 1e-6 && worst_grad <= 1e-6;
  fmt::print("{}: {} images, {} targets, {} denoising levels: {} terms ({} of {} bit-identical), max rel. diff {:.2g}; "
             "gradients of {} outputs, max rel. diff {:.2g}: {}\n",
             name, targets.counts.size(), targets.total(), outputs.denoising.size(), terms.size(), exact, expected_terms,
             worst_term, levels.size() * 2, worst_grad, ok ? "ok" : "MISMATCH");
  return ok;
}

}  // namespace

int main(int argc, char** argv) { return parity::run_cases(argc, argv, "criterion.safetensors", "counts", "criterion", run_case); }
