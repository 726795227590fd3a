// Parity with libreyolo 1.6.0's RTMDet (t at 3 classes; m at 2, whose distances are exp'ed): our
// network loads its state dict (its copies of the head's shared convolutions under levels 1 and 2
// are the level-0 tensors: checked equal, then left out) strictly and gives the same class and box
// maps: in eval mode to 1e-4 of its float32 maps, in train mode as close to the same model's
// float64 maps as its own float32 maps are, within kNoiseFactor. Its RTMDetLoss on its eval maps
// for hand-made boxes: the dynamic soft-label assignment (the same foreground priors and labels,
// the IoU metrics to 1e-6), the loss and its two terms to 1e-5, the gradient with respect to every
// map to 1e-5 of its largest entry, and through the network (eval mode) every parameter's gradient
// to 1e-4 of the tensor's largest entry. The reference file comes from make_rtmdet_reference.py.
//   rtmdet_parity_test DIR
#include "models/rtmdet/loss.h"
#include "models/rtmdet/model.h"
#include "models/targets.h"
#include "module_parity.h"

#include <ATen/ATen.h>

#include <regex>
#include <set>

using namespace libreyolo::models;

namespace {

constexpr double kEvalTolerance = 1e-4;
constexpr double kNoiseFactor = 10;
constexpr double kTolerance = 1e-5;
constexpr double kGradientTolerance = 1e-4;

bool run_case(const parity::Tensors& io, const std::string& key) {
  const at::Tensor config = io.at(key + ".config");
  const std::string size(1, "tsmlx"[config[0].item<int>()]);
  const int classes = config[1].item<int>();
  bool ok = true;
  const auto report = [&](const std::string& what, double value, double bound) {
    const bool pass = value <= bound;
    fmt::print("  rtmdet-{} nc {} {}: {:.3g} (bound {:.3g}) {}\n", size, classes, what, value, bound, pass ? "ok" : "MISMATCH");
    ok = ok && pass;
  };
  // the reference's state dict without its repeated shared convolutions
  parity::Tensors weights = parity::with_prefix(io, key + ".w.");
  const std::regex shared(R"(head\.(cls|reg)_convs\.([12])\.([01])\.conv\.weight)");
  std::int64_t aliases = 0;
  bool aliases_equal = true;
  for (auto it = weights.begin(); it != weights.end();) {
    std::smatch m;
    if (std::regex_match(it->first, m, shared)) {
      const std::string owner = fmt::format("head.{}_convs.0.{}.conv.weight", m[1].str(), m[3].str());
      aliases_equal = aliases_equal && weights.count(owner) && weights.at(owner).equal(it->second);
      ++aliases;
      it = weights.erase(it);
    } else {
      ++it;
    }
  }
  fmt::print("  rtmdet-{}: {} shared-convolution copies in the reference's state dict {}\n", size, aliases,
             aliases == 8 && aliases_equal ? "(equal to level 0's, left out)" : "MISMATCH");
  ok = ok && aliases == 8 && aliases_equal;

  rtmdet::Model model(size, classes);
  load_state_dict(*model, weights, /*strict=*/true);
  const at::Tensor input = io.at(key + ".input");
  const std::int64_t batch = input.size(0), height = input.size(2), width = input.size(3);
  const auto split = [](const at::Tensor& map) { return std::pair{map.narrow(1, 0, 4), map.narrow(1, 4, map.size(1) - 4)}; };
  {
    torch::NoGradGuard no_grad;
    model->eval();
    const auto maps = model->forward(input);
    parity::Comparison eval;
    for (int level = 0; level < 3; ++level) {
      const auto [reg, cls] = split(maps[level]);
      eval.add(cls, io.at(fmt::format("{}.eval_cls{}", key, level)));
      eval.add(reg, io.at(fmt::format("{}.eval_reg{}", key, level)));
    }
    report(fmt::format("eval maps ({}/{} bit-identical)", eval.exact, eval.compared), eval.worst, kEvalTolerance);
    model->train();
    const auto train = model->forward(input);
    for (int level = 0; level < 3; ++level) {
      const auto [reg, cls] = split(train[level]);
      for (const auto& [name, ours] : {std::pair{"cls", cls}, std::pair{"reg", reg}}) {
        const at::Tensor truth = io.at(fmt::format("{}.train64_{}{}", key, name, level));
        const double theirs = parity::difference(io.at(fmt::format("{}.train_{}{}", key, name, level)), truth);
        report(fmt::format("train {} map {} against float64 (theirs {:.3g})", name, level, theirs), parity::difference(ours, truth),
               std::max(kNoiseFactor * theirs, 1e-6));
      }
    }
  }

  load_state_dict(*model, weights, /*strict=*/true);  // train mode moved the statistics
  model->eval();
  const TargetBatch targets = pad_targets(io.at(key + ".targets"), batch, width, height);
  report("target boxes (ours from normalised rows, theirs in pixels)",
         parity::difference(targets.boxes_xyxy.flatten(0, 1).index_select(0, targets.valid.flatten().nonzero().squeeze(1)),
                            io.at(key + ".boxes_xyxy")),
         1e-4);
  std::vector<at::Tensor> maps;
  for (int level = 0; level < 3; ++level) {
    maps.push_back(at::cat({io.at(fmt::format("{}.eval_reg{}", key, level)), io.at(fmt::format("{}.eval_cls{}", key, level))}, 1)
                       .requires_grad_(true));
  }
  {
    const rtmdet::Predictions p = rtmdet::predictions(maps);
    const rtmdet::Assignment a = rtmdet::assign(p.boxes.detach(), p.logits.detach(), p.priors, targets);
    const at::Tensor labels = io.at(key + ".assigned_labels");
    const at::Tensor theirs_fg = labels.lt(classes);
    const at::Tensor ours_labels = at::where(a.foreground, targets.classes.gather(1, a.gt_index), at::full_like(a.gt_index, classes));
    const bool same = a.foreground.equal(theirs_fg) && ours_labels.equal(labels);
    fmt::print("  rtmdet-{} assignment: {} positives, the reference {} {}\n", size, a.foreground.sum().item<std::int64_t>(),
               theirs_fg.sum().item<std::int64_t>(), same ? "(same priors and labels)" : "MISMATCH");
    ok = ok && same && theirs_fg.sum().item<std::int64_t>() > 0;
    report("assignment IoU metrics", parity::difference(a.iou, io.at(key + ".assign_metrics")), 1e-6);
  }
  const LossTerms terms = rtmdet::loss(maps, targets, {});
  terms.total.backward();
  report("loss", parity::difference(terms.total.reshape({1}), io.at(key + ".loss.total_loss")), kTolerance);
  report("cls_loss", parity::difference(terms.part("cls_loss").reshape({1}), io.at(key + ".loss.loss_cls")), kTolerance);
  report("bbox_loss", parity::difference(terms.part("bbox_loss").reshape({1}), io.at(key + ".loss.loss_bbox")), kTolerance);
  for (int level = 0; level < 3; ++level) {
    const auto [reg, cls] = split(maps[level].grad());
    for (const auto& [name, ours] : {std::pair{"cls", cls}, std::pair{"reg", reg}}) {
      const at::Tensor theirs = io.at(fmt::format("{}.grad_{}{}", key, name, level));
      const double scale = theirs.abs().max().item<double>();
      report(fmt::format("level {} {} map gradient (relative to its largest, {:.3g})", level, name, scale),
             (ours - theirs).abs().max().item<double>() / std::max(scale, 1e-30), kTolerance);
    }
  }

  // through the network (eval mode): every parameter's gradient
  rtmdet::loss(model->forward(input), targets, {}).total.backward();
  const parity::Tensors reference = parity::with_prefix(io, key + ".grad.");
  const parity::WorstGradient gradients = parity::largest_relative_gradient_difference(*model, reference);
  report(fmt::format("parameter gradients (largest difference relative to the tensor's largest entry, {} tensors; worst {})",
                     reference.size(), gradients.name),
         gradients.worst, kGradientTolerance);
  return ok;
}

// The same seed gives the same initial weights: RTMDet-t at 80 classes built right after
// manual_seed, as both trainers build it, draws every tensor in libreyolo's order (same LibTorch
// generator), so a training of ours and one of the reference start from the same point.
bool same_initial_weights(const std::string& dir) {
  const parity::Tensors reference = read_safetensors(dir + "/rtmdet_init.safetensors");
  bool ok = true;
  for (const int seed : {0, 1}) {
    torch::manual_seed(static_cast<std::uint64_t>(seed));
    rtmdet::Model model("t", 80);
    int differing = 0;
    std::string first;
    const NamedTensors ours = state_dict(*model);
    std::set<std::string> names;
    for (const auto& [name, tensor] : ours) {
      names.insert(name);
      const auto found = reference.find(fmt::format("seed{}.{}", seed, name));
      if (found == reference.end() || !at::equal(found->second, tensor)) {
        if (differing++ == 0) first = name;
      }
    }
    // every reference tensor is ours too, or a level-1/2 copy of the head's shared convolutions
    int unmatched = 0;
    const std::regex shared(R"(head\.(cls|reg)_convs\.[12]\.\d\.conv\.weight)");
    const std::string prefix = fmt::format("seed{}.", seed);
    for (const auto& [key, tensor] : reference) {
      if (key.rfind(prefix, 0) != 0) continue;
      const std::string name = key.substr(prefix.size());
      if (!std::regex_match(name, shared) && !names.count(name)) ++unmatched;
    }
    const bool same = differing == 0 && unmatched == 0 && !ours.empty();
    fmt::print("initial weights, seed {}: {} tensors, {} differ{}{}, {} of libreyolo's not ours {}\n", seed, ours.size(), differing,
               first.empty() ? "" : " (first: ", first.empty() ? "" : first + ")", unmatched, same ? "ok" : "MISMATCH");
    ok = ok && same;
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  const int cases = parity::run_cases(argc, argv, "rtmdet.safetensors", "input", "RTMDet", run_case);
  if (argc != 2) return cases;
  try {
    return same_initial_weights(argv[1]) ? cases : 1;
  } catch (const std::exception& error) {
    fmt::print("FAIL: {}\n", error.what());
    return 1;
  }
}
