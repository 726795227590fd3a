// Parity with libreyolo 1.6.0: our model loads the reference state dict unchanged (same names
// and shapes, strict) and gives the same raw head outputs on the same input: in eval mode to 1e-4
// of the reference's float32 maps; in train mode (and for YOLOv9 the PGI auxiliary head's maps),
// in NCHW and in channels-last, as close to the same model's float64 maps as PyTorch's own float32
// maps are, within kNoiseFactor. Train mode normalises by the batch statistics of two small
// images, and float32 rounding grows through the network there: PyTorch's own float32 maps are
// ~2e-4 off float64 for YOLOv9-t and its channels-last ones up to 5x further, so any arithmetic
// but PyTorch's own op-for-op (our fused BatchNorm+SiLU, nn/bn_silu.h) differs from its float32
// maps by that much, while a real error (a wrong statistic, a missing term) is orders larger.
// The reference files come from make_reference.py.
//   model_parity_test DIR FAMILY SIZE...
#include "models/model.h"
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

// How many levels the reference wrote under every one of `prefixes` (<prefix><level>); false, with
// a MISMATCH line, when ours has another count: ours may not drop or add one.
bool same_levels(const std::string& what, const std::vector<at::Tensor>& ours, const std::map<std::string, at::Tensor>& io,
                 const std::vector<std::string>& prefixes, std::size_t& reference_levels) {
  reference_levels = 0;
  const auto wrote = [&](std::size_t level) {
    for (const auto& prefix : prefixes) {
      if (!io.count(prefix + std::to_string(level))) return false;
    }
    return true;
  };
  while (wrote(reference_levels)) ++reference_levels;
  const bool ok = reference_levels > 0 && reference_levels == ours.size();
  if (!ok) fmt::print("  {}: {} levels, the reference {} MISMATCH\n", what, ours.size(), reference_levels);
  return ok;
}

bool compare(const std::string& what, const std::vector<at::Tensor>& ours, const std::map<std::string, at::Tensor>& io,
             const std::string& prefix) {
  std::size_t reference_levels = 0;
  bool ok = same_levels(what, ours, io, {prefix}, reference_levels);
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

// How much further from float64 than PyTorch's float32 maps ours may be (see the top).
constexpr double kNoiseFactor = 6.0;

double max_difference(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

// Train-mode maps against the float64 truth (prefix64_<level>), with PyTorch's float32 maps
// (prefix<level>) as the yardstick.
bool compare_to_truth(const std::string& what, const std::vector<at::Tensor>& ours, const std::map<std::string, at::Tensor>& io,
                      const std::string& prefix) {
  std::size_t reference_levels = 0;
  bool ok = same_levels(what, ours, io, {prefix, prefix + "64_"}, reference_levels);
  for (std::size_t level = 0; level < std::min(ours.size(), reference_levels); ++level) {
    const at::Tensor& pytorch = io.at(prefix + std::to_string(level));
    const at::Tensor& truth = io.at(prefix + "64_" + std::to_string(level));
    const bool same_shape = ours[level].sizes() == truth.sizes() && pytorch.sizes() == truth.sizes();
    const double error = same_shape ? max_difference(ours[level], truth) : INFINITY;
    const double pytorch_error = same_shape ? max_difference(pytorch, truth) : 0.0;
    const double bound = std::max(1e-4, kNoiseFactor * pytorch_error);
    const bool close = error <= bound;
    fmt::print("  {} level {}: shape {} max |ours - f64| {:.3g}, PyTorch f32's {:.3g} (bound {:.3g}), |ours - PyTorch f32| {:.3g} {}\n",
               what, level, fmt::join(ours[level].sizes(), "x"), error, pytorch_error, bound,
               same_shape ? max_difference(ours[level], pytorch) : INFINITY, close ? "ok" : "MISMATCH");
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
      const at::Tensor input = io.at("input");
      ok = compare_to_truth("train NCHW", forward(input), io, "train") && ok;
      if (forward_aux) ok = compare_to_truth("aux   NCHW", forward_aux(input), io, "aux") && ok;
      // channels-last: how YOLOv9 trains on the CPU
      to_channels_last(*module);
      const at::Tensor input_cl = input.contiguous(at::MemoryFormat::ChannelsLast);
      ok = compare_to_truth("train channels-last", forward(input_cl), io, "train") && ok;
      if (forward_aux) ok = compare_to_truth("aux   channels-last", forward_aux(input_cl), io, "aux") && ok;
    }
  } catch (const std::exception& error) {
    fmt::print("error: {}\n", error.what());
    return 1;
  }
  return ok ? 0 : 1;
}
