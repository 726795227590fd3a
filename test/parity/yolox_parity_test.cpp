// Parity with libreyolo 1.6.0: our YOLOX loads the reference state dict unchanged (same names
// and shapes, strict) and gives the same raw head outputs on the same input to 1e-4, in eval
// and in train mode. The reference files come from make_yolox_reference.py.
#include "models/safetensors.h"
#include "models/yolox/model.h"

#include <ATen/ATen.h>
#include <fmt/core.h>
#include <fmt/ranges.h>

#include <exception>
#include <string>

using namespace libreyolo::models;

namespace {

bool compare(const std::string& what, const std::vector<at::Tensor>& ours, const std::map<std::string, at::Tensor>& io,
             const std::string& prefix) {
  bool ok = true;
  for (std::size_t level = 0; level < ours.size(); ++level) {
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
  if (argc < 3) {
    fmt::print(stderr, "usage: yolox_parity_test DIR SIZE...\n");
    return 2;
  }
  const std::string dir = argv[1];
  bool ok = true;
  try {
    for (int i = 2; i < argc; ++i) {
      const std::string size = argv[i];
      yolox::Model model(size, 80);
      load_state_dict(*model, read_safetensors(dir + "/yolox-" + size + ".weights.safetensors"), /*strict=*/true);
      const auto io = read_safetensors(dir + "/yolox-" + size + ".io.safetensors");
      fmt::print("yolox-{}: reference state dict loaded strictly ({} entries)\n", size, state_dict(*model).size());
      at::NoGradGuard no_grad;
      model->eval();
      ok = compare("eval ", model->forward(io.at("input")), io, "eval") && ok;
      model->train();
      ok = compare("train", model->forward(io.at("input")), io, "train") && ok;
    }
  } catch (const std::exception& error) {
    fmt::print("error: {}\n", error.what());
    return 1;
  }
  return ok ? 0 : 1;
}
