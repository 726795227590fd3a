// Helpers of the module parity tests (a reference module's state dict, inputs, outputs and
// gradients, written by a make_*_reference.py into a safetensors file).
#pragma once

#include "models/safetensors.h"

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include <fmt/core.h>

#include <algorithm>
#include <exception>
#include <functional>
#include <cstddef>
#include <map>
#include <cstdlib>
#include <string>

namespace parity {

using Tensors = std::map<std::string, at::Tensor>;

// max |ours - reference| / max(1, |reference|); 1e30 when the shapes differ.
inline double difference(const at::Tensor& ours, const at::Tensor& reference) {
  if (ours.sizes() != reference.sizes()) return 1e30;
  if (ours.numel() == 0) return 0;
  return ((ours.to(at::kDouble) - reference.to(at::kDouble)).abs() / reference.to(at::kDouble).abs().clamp_min(1))
      .max()
      .item<double>();
}

// The tensors whose names start with `prefix`, under the rest of their names.
inline Tensors with_prefix(const Tensors& io, const std::string& prefix) {
  Tensors out;
  for (const auto& [key, value] : io) {
    if (key.starts_with(prefix)) out[key.substr(prefix.size())] = value;
  }
  return out;
}

// The largest difference of a group of compared tensors, and how many were bit-identical.
struct Comparison {
  double worst = 0;
  std::size_t exact = 0, compared = 0;

  void add(const at::Tensor& ours, const at::Tensor& reference) {
    worst = std::max(worst, difference(ours, reference));
    exact += ours.sizes() == reference.sizes() && at::equal(ours, reference);
    ++compared;
  }
  void missing() { worst = 1e30; }
};

// Every trainable parameter's gradient against `reference` (by name); a missing or extra one fails.
// PARITY_DEBUG=1 in the environment names each gradient that is not bit-identical.
inline void compare_gradients(torch::nn::Module& module, const Tensors& reference, Comparison& comparison) {
  std::size_t trainable = 0;
  for (const auto& item : module.named_parameters()) {
    if (!item.value().requires_grad()) continue;
    ++trainable;
    const auto it = reference.find(item.key());
    if (it == reference.end() || !item.value().grad().defined()) {
      comparison.missing();
      continue;
    }
    comparison.add(item.value().grad(), it->second);
    if (std::getenv("PARITY_DEBUG") && difference(item.value().grad(), it->second) > 0) {  // which ones differ
      fmt::print("  {}: gradient differs by {:.3g}\n", item.key(), difference(item.value().grad(), it->second));
    }
  }
  if (trainable != reference.size()) comparison.missing();
}

// Every trainable parameter's gradient against `reference` (name -> gradient), each as its largest
// difference relative to the reference tensor's largest entry: the worst of them and its name;
// 1e30 when a gradient is missing or the counts differ.
struct WorstGradient {
  double worst = 0;
  std::string name;
};
inline WorstGradient largest_relative_gradient_difference(const torch::nn::Module& module, const Tensors& reference) {
  WorstGradient out;
  const auto parameters = module.named_parameters();
  if (reference.size() != parameters.size()) out.worst = 1e30;
  for (const auto& item : parameters) {
    const auto it = reference.find(item.key());
    if (it == reference.end() || !item.value().grad().defined()) {
      out = {1e30, item.key()};
      continue;
    }
    const double scale = it->second.abs().max().item<double>();
    const double d = (item.value().grad() - it->second).abs().max().item<double>() / std::max(scale, 1e-30);
    if (d > out.worst) out = {d, item.key()};
  }
  return out;
}

// main() of a parity checker: `checker DIR` reads DIR/<file>, runs `run_case` on case0, case1, ...
// (while "<case>.<marker>" exists) and prints "<title> parity: OK" or FAILED. Exit 0, 1, or 2 for usage.
inline int run_cases(int argc, char** argv, const std::string& file, const std::string& marker, const std::string& title,
                     const std::function<bool(const Tensors&, const std::string&)>& run_case) {
  if (argc != 2) {
    fmt::print(stderr, "usage: {} DIR\n", argc > 0 ? argv[0] : "checker");
    return 2;
  }
  try {
    const Tensors io = libreyolo::models::read_safetensors(std::string(argv[1]) + "/" + file);
    bool ok = true;
    int cases = 0;
    for (; io.count(fmt::format("case{}.{}", cases, marker)); ++cases) ok = run_case(io, fmt::format("case{}", cases)) && ok;
    if (cases == 0) {
      fmt::print("FAIL: no cases in {}/{}\n", argv[1], file);
      return 1;
    }
    fmt::print("{} parity: {}\n", title, ok ? "OK" : "FAILED");
    return ok ? 0 : 1;
  } catch (const std::exception& error) {
    fmt::print("FAIL: {}\n", error.what());
    return 1;
  }
}

}  // namespace parity
