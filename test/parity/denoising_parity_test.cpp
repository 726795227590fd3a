// Parity of our contrastive denoising groups with libreyolo 1.6.0's (make_denoising_reference.py):
// from the same random draws, the same noised labels, the same noised boxes bit for bit, the same
// attention mask, positives and group count; no queries for a batch without targets.
//   denoising_parity_test DIR
#include "models/detr_common/denoising.h"
#include "models/safetensors.h"
#include "module_parity.h"

#include <ATen/ATen.h>
#include <fmt/core.h>

using namespace libreyolo::models;
using parity::Tensors;

namespace {

bool run_case(const Tensors& io, const std::string& name) {
  const at::Tensor config = io.at(name + ".config");
  detr::DenoisingOptions options;
  options.classes = 12;
  options.queries = 30;
  options.denoising = config[0].item<std::int64_t>();
  const at::Tensor counts = io.at(name + ".counts");
  detr::DetrTargets targets{io.at(name + ".classes"), io.at(name + ".boxes"),
                            std::vector<std::int64_t>(counts.data_ptr<std::int64_t>(), counts.data_ptr<std::int64_t>() + counts.numel())};
  const bool expected = io.count(name + ".out.classes") > 0;
  detr::DenoisingNoise noise;
  if (expected) {
    noise = {io.at(name + ".noise.label_uniform"), io.at(name + ".noise.random_label"), io.at(name + ".noise.sign_bit"),
             io.at(name + ".noise.box_uniform")};
  }
  const auto queries = detr::make_denoising_queries(targets, options, noise);
  bool ok = expected == (queries.count > 0);
  if (ok && expected) {
    const bool same_classes = at::equal(queries.classes, io.at(name + ".out.classes"));
    const bool same_boxes = queries.boxes_unact.sizes() == io.at(name + ".out.boxes_unact").sizes() &&
                            at::equal(queries.boxes_unact, io.at(name + ".out.boxes_unact"));
    const bool same_mask = at::equal(queries.attn_mask, io.at(name + ".out.attn_mask"));
    bool same_positives = queries.match.groups == io.at(name + ".out.groups").item<std::int64_t>();
    for (std::size_t i = 0; i < targets.counts.size(); ++i) {
      same_positives = same_positives && at::equal(queries.match.positive_queries[i], io.at(fmt::format("{}.out.positive{}", name, i)));
    }
    ok = same_classes && same_boxes && same_mask && same_positives;
    fmt::print("{}: {} images, {} targets, {} queries asked: {} denoising queries in {} groups; labels {}, boxes {}, mask {}, "
               "positives {}\n",
               name, targets.counts.size(), targets.total(), options.denoising, queries.count, queries.match.groups,
               same_classes ? "equal" : "DIFFER", same_boxes ? "bit-identical" : "DIFFER", same_mask ? "equal" : "DIFFERS",
               same_positives ? "equal" : "DIFFER");
  } else {
    fmt::print("{}: {} targets: {} ({})\n", name, targets.total(), queries.count > 0 ? "queries made" : "no queries",
               ok ? "as the reference" : "NOT as the reference");
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) { return parity::run_cases(argc, argv, "denoising.safetensors", "config", "denoising", run_case); }
