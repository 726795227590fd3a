// Parity of our assigners and losses with libreyolo 1.6.0: for the same head maps and targets
// (written by make_loss_reference.py), every loss term equals the reference's to 1e-4
// (relative, or absolute below 1) and so does the gradient of the total with respect to each map.
//   loss_parity_test DIR
#include "models/safetensors.h"
#include "models/targets.h"
#include "models/yolo9/loss.h"
#include "models/yolox/loss.h"

#include <ATen/ATen.h>
#include <fmt/core.h>

#include <exception>
#include <map>
#include <string>
#include <vector>

using namespace libreyolo::models;

namespace {

bool close(const at::Tensor& ours, const at::Tensor& expected, double tolerance) {
  return ours.sizes() == expected.sizes() && at::allclose(ours.to(at::kFloat), expected.to(at::kFloat), tolerance, tolerance);
}

bool run_family(const std::string& dir, const std::string& family) {
  const auto io = read_safetensors(dir + "/loss-" + family + ".safetensors");
  bool ok = true;
  for (int c = 0; io.count(fmt::format("case{}.targets", c)); ++c) {
    const std::string name = fmt::format("case{}", c);
    std::vector<at::Tensor> maps;
    for (int level = 0; level < 3; ++level) maps.push_back(io.at(fmt::format("{}.map{}", name, level)).clone().requires_grad_());
    const std::int64_t images = maps[0].size(0);
    const TargetBatch targets = pad_targets(io.at(name + ".targets"), images, maps[0].size(3) * 8, maps[0].size(2) * 8);
    at::Tensor total;
    std::vector<std::pair<std::string, at::Tensor>> parts;
    if (family == "yolo9") {
      auto terms = yolo9::loss(maps, targets, {});
      total = terms.total;
      parts = terms.parts;
    } else {
      yolo_common::SimOtaLossOptions options;
      options.use_l1 = io.at(name + ".use_l1").item<double>() != 0;
      auto terms = yolox::loss(maps, targets, options);
      total = terms.total;
      parts = terms.parts;
    }
    parts.insert(parts.begin(), {"total_loss", total.detach()});
    total.backward();
    fmt::print("{} {} ({} images, {} boxes):\n", family, name, images, targets.valid.sum().item<std::int64_t>());
    for (const auto& [key, value] : parts) {
      const at::Tensor& expected = io.at(name + "." + key);
      const bool same = close(value, expected, 1e-4);
      fmt::print("  {:<10} ours {:>12.6f}  reference {:>12.6f}  {}\n", key, value.item<double>(), expected.item<double>(),
                 same ? "ok" : "MISMATCH");
      ok = ok && same;
    }
    for (int level = 0; level < 3; ++level) {
      const at::Tensor& expected = io.at(fmt::format("{}.grad{}", name, level));
      const at::Tensor grad = maps[level].grad();
      const double difference = (grad - expected).abs().max().item<double>();
      const bool same = close(grad, expected, 1e-4);
      fmt::print("  grad {}     max |diff| {:.3g} (max |grad| {:.3g})  {}\n", level, difference,
                 expected.abs().max().item<double>(), same ? "ok" : "MISMATCH");
      ok = ok && same;
    }
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    fmt::print(stderr, "usage: loss_parity_test DIR\n");
    return 2;
  }
  try {
    const bool yolo9_ok = run_family(argv[1], "yolo9");
    const bool yolox_ok = run_family(argv[1], "yolox");
    return yolo9_ok && yolox_ok ? 0 : 1;
  } catch (const std::exception& error) {
    fmt::print("error: {}\n", error.what());
    return 1;
  }
}
