// Parity of eval::ClassifyMetrics with libreyolo 1.6.0's ClassifyValidator
// (make_classify_metrics_reference.py): top-1, top-min(5, classes), macro precision, recall and F1
// over the classes present, on the same batches of logits and labels (ties, absent classes, one
// class); equal to the last bit.
//   classify_metrics_parity_test DIR
#include "eval/classify_metrics.h"
#include "module_parity.h"

#include <ATen/ATen.h>
#include <fmt/core.h>

#include <array>
#include <string>

namespace {

bool run_case(const parity::Tensors& io, const std::string& name) {
  const at::Tensor config = io.at(name + ".config");
  const int classes = static_cast<int>(config[0].item<std::int64_t>());
  const auto batches = config[1].item<std::int64_t>();
  libreyolo::eval::ClassifyMetrics metrics(classes);
  for (std::int64_t b = 0; b < batches; ++b) metrics.update(io.at(fmt::format("{}.logits{}", name, b)), io.at(fmt::format("{}.targets{}", name, b)));
  const auto macro = metrics.macro();
  const std::array<double, 5> ours{metrics.top1(), metrics.top5(), macro.precision, macro.recall, macro.f1};
  const at::Tensor reference = io.at(name + ".metrics");
  bool ok = true;
  for (std::size_t i = 0; i < ours.size(); ++i) ok = ok && ours[i] == reference[static_cast<std::int64_t>(i)].item<double>();
  fmt::print("{}: {} classes, {} images: top1 {:.6f}, top{} {:.6f}, P {:.6f}, R {:.6f}, F1 {:.6f} (reference {:.6f} {:.6f} {:.6f} "
             "{:.6f} {:.6f}): {}\n",
             name, classes, metrics.total(), ours[0], metrics.top_k(), ours[1], ours[2], ours[3], ours[4],
             reference[0].item<double>(), reference[1].item<double>(), reference[2].item<double>(), reference[3].item<double>(),
             reference[4].item<double>(), ok ? "identical" : "MISMATCH");
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  return parity::run_cases(argc, argv, "classify_metrics.safetensors", "config", "classify metrics", run_case);
}
