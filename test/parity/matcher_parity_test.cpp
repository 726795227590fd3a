// Parity of our Hungarian matcher with libreyolo 1.6.0's RT-DETR matcher (written by
// make_matcher_reference.py): the [B, Q, T] cost equals the reference's bit for bit, and every
// image's assignment is the reference's (SciPy's) pair for pair, ties included.
//   matcher_parity_test DIR
#include "models/detr_common/matcher.h"
#include "models/safetensors.h"
#include "module_parity.h"

#include <ATen/ATen.h>
#include <fmt/core.h>

#include <exception>
#include <vector>

using namespace libreyolo::models;

namespace {

std::vector<std::int64_t> values(const at::Tensor& tensor) {
  const at::Tensor flat = tensor.to(at::kLong).contiguous();
  return {flat.const_data_ptr<std::int64_t>(), flat.const_data_ptr<std::int64_t>() + flat.numel()};
}

bool run_case(const std::map<std::string, at::Tensor>& io, const std::string& name) {
  detr::DetrTargets targets{io.at(name + ".classes"), io.at(name + ".target_boxes"), values(io.at(name + ".counts"))};
  const at::Tensor& logits = io.at(name + ".logits");
  const at::Tensor cost = detr::matching_cost(logits, io.at(name + ".boxes"), targets);
  const at::Tensor& expected = io.at(name + ".cost");
  const bool same_cost = cost.sizes() == expected.sizes() && at::equal(cost, expected);
  fmt::print("{}: {} images x {} queries, {} targets: cost {}", name, logits.size(0), logits.size(1), targets.total(),
             same_cost ? "bit-identical" : "DIFFERS");
  if (!same_cost && cost.sizes() == expected.sizes()) fmt::print(" (max |diff| {:g})", (cost - expected).abs().max().item<double>());
  const auto assignments = detr::assign_queries(cost, targets.counts);
  int same_images = 0;
  for (std::size_t image = 0; image < assignments.size(); ++image) {
    const auto rows = values(io.at(fmt::format("{}.rows{}", name, image)));
    const auto cols = values(io.at(fmt::format("{}.cols{}", name, image)));
    same_images += assignments[image].rows == rows && assignments[image].cols == cols;
  }
  fmt::print("; assignments equal in {} of {} images\n", same_images, assignments.size());
  return same_cost && same_images == static_cast<int>(assignments.size());
}

}  // namespace

int main(int argc, char** argv) { return parity::run_cases(argc, argv, "matcher.safetensors", "cost", "matcher", run_case); }
