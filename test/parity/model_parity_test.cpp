// Parity with libreyolo 1.6.0: our model loads the reference state dict unchanged (same names
// and shapes, strict) and gives the same raw head outputs on the same input to 1e-4, in eval
// and in train mode, and for YOLOv9 the PGI auxiliary head's too. The reference files come from
// make_reference.py.
//   model_parity_test DIR FAMILY SIZE...
#include "models/safetensors.h"
#include "models/yolo9/model.h"
#include "models/yolox/model.h"

#include <ATen/ATen.h>
#include <algorithm>
#include <fmt/core.h>
#include <fmt/ranges.h>

#include <exception>
#include <functional>
#include <memory>
#include <string>

using namespace libreyolo::models;

namespace {

bool compare(const std::string& what, const std::vector<at::Tensor>& ours, const std::map<std::string, at::Tensor>& io,
             const std::string& prefix) {
  // as many levels as the reference wrote: ours may not drop or add one
  std::size_t reference_levels = 0;
  while (io.count(prefix + std::to_string(reference_levels))) ++reference_levels;
  bool ok = reference_levels > 0 && reference_levels == ours.size();
  if (!ok) fmt::print("  {}: {} levels, the reference {} MISMATCH\n", what, ours.size(), reference_levels);
  for (std::size_t level = 0; level < std::min(ours.size(), reference_levels); ++level) {
    const at::Tensor& expected = io.at(prefix + std::to_string(level));
    const double difference = (ours[level] - expected).abs().max().item<double>();
    const bool close = ours[level].sizes() == expected.sizes() && at::allclose(ours[level], expected, 1e-4, 1e-4);
    fmt::print("  {} level {}: shape {} max |diff| {:.3g} {}\n", what, level, fmt::join(ours[level].sizes(), "x"),
               difference, close ? "ok" : "MISMATCH");
    ok = ok && close;
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    fmt::print(stderr, "usage: model_parity_test DIR FAMILY SIZE...\n");
    return 2;
  }
  const std::string dir = argv[1];
  const std::string family = argv[2];
  bool ok = true;
  try {
    for (int i = 3; i < argc; ++i) {
      const std::string size = argv[i];
      std::shared_ptr<torch::nn::Module> module;
      std::function<std::vector<at::Tensor>(const at::Tensor&)> forward;
      std::function<std::vector<at::Tensor>(const at::Tensor&)> forward_aux;
      if (family == "yolox") {
        yolox::Model model(size, 80);
        module = model.ptr();
        forward = [model](const at::Tensor& x) mutable { return model->forward(x); };
      } else {
        yolo9::Model model(size, 80);
        model->enable_aux();
        module = model.ptr();
        forward = [model](const at::Tensor& x) mutable { return model->forward(x); };
        forward_aux = [model](const at::Tensor& x) mutable { return model->forward_with_aux(x).second; };
      }
      const std::string stem = dir + "/" + family + "-" + size;
      load_state_dict(*module, read_safetensors(stem + ".weights.safetensors"), /*strict=*/true);
      const auto io = read_safetensors(stem + ".io.safetensors");
      fmt::print("{}-{}: reference state dict loaded strictly ({} entries)\n", family, size, state_dict(*module).size());
      at::NoGradGuard no_grad;
      module->eval();
      ok = compare("eval ", forward(io.at("input")), io, "eval") && ok;
      module->train();
      ok = compare("train", forward(io.at("input")), io, "train") && ok;
      if (forward_aux) ok = compare("aux  ", forward_aux(io.at("input")), io, "aux") && ok;
    }
  } catch (const std::exception& error) {
    fmt::print("error: {}\n", error.what());
    return 1;
  }
  return ok ? 0 : 1;
}
