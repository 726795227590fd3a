// Parity with libreyolo 1.6.0's YOLOv7-b: our network loads its state dict unchanged (same names
// and shapes, strict) and gives the same head maps on the same input: in eval mode to 1e-4 of its
// float32 maps, decoded (boxes, objectness x class) to 1e-4 of its decode_v7_head; in train mode
// (BatchNorm on the batch's statistics) as close to the same model's float64 maps as its own
// float32 maps are, within kNoiseFactor. Its YOLOv7Loss on its eval maps for hand-made boxes: the
// loss and its three terms to 1e-5, the gradient with respect to each map to 1e-5 of its largest
// entry, and through the network (eval mode) every parameter's gradient to 1e-4 of the tensor's
// largest entry. The reference file comes from make_yolo7_reference.py.
//   yolo7_parity_test DIR
#include "models/decode.h"
#include "models/family.h"
#include "models/targets.h"
#include "models/yolo7/loss.h"
#include "models/yolo7/model.h"
#include "module_parity.h"

#include <ATen/ATen.h>

using namespace libreyolo::models;

namespace {

constexpr double kEvalTolerance = 1e-4;
constexpr double kNoiseFactor = 10;
constexpr double kTolerance = 1e-5;
constexpr double kGradientTolerance = 1e-4;
constexpr int kClasses = 3;

bool run_case(const parity::Tensors& io, const std::string& key) {
  yolo7::Model model(kClasses);
  load_state_dict(*model, parity::with_prefix(io, key + ".w."), /*strict=*/true);
  const at::Tensor input = io.at(key + ".input");
  const std::int64_t batch = input.size(0), height = input.size(2), width = input.size(3);
  bool ok = true;
  const auto report = [&](const std::string& what, double value, double bound) {
    const bool pass = value <= bound;
    fmt::print("  yolo7-b {}: {:.3g} (bound {:.3g}) {}\n", what, value, bound, pass ? "ok" : "MISMATCH");
    ok = ok && pass;
  };
  {
    torch::NoGradGuard no_grad;
    model->eval();
    const auto maps = model->forward(input);
    if (maps.size() != 3) {
      fmt::print("  yolo7-b: {} outputs, expected 3 levels MISMATCH\n", maps.size());
      return false;
    }
    parity::Comparison eval;
    for (int level = 0; level < 3; ++level) eval.add(maps[level], io.at(fmt::format("{}.eval{}", key, level)));
    report(fmt::format("eval maps ({}/{} bit-identical)", eval.exact, eval.compared), eval.worst, kEvalTolerance);

    // the family's decoder (batch 0) against decode_v7_head, level by level
    const Decoded decoded = family("yolo7").decode(maps);
    std::int64_t offset = 0;
    for (int level = 0; level < 3; ++level) {
      const at::Tensor boxes = io.at(fmt::format("{}.decoded_boxes{}", key, level));  // cxcywh
      const at::Tensor scores = io.at(fmt::format("{}.decoded_scores{}", key, level));
      const std::int64_t n = boxes.size(0);
      const at::Tensor centre = boxes.slice(1, 0, 2), half = boxes.slice(1, 2, 4) / 2;
      report(fmt::format("level {} decoded boxes", level),
             parity::difference(decoded.boxes[0].slice(0, offset, offset + n), at::cat({centre - half, centre + half}, 1)), kEvalTolerance);
      report(fmt::format("level {} decoded scores", level),
             parity::difference(decoded.class_scores[0].slice(0, offset, offset + n), scores), kEvalTolerance);
      offset += n;
    }
    model->train();
    const auto train = model->forward(input);
    for (int level = 0; level < 3; ++level) {
      const at::Tensor truth = io.at(fmt::format("{}.train64_{}", key, level));
      const double theirs = parity::difference(io.at(fmt::format("{}.train{}", key, level)), truth);
      report(fmt::format("train map {} against float64 (theirs {:.3g})", level, theirs), parity::difference(train[level], truth),
             std::max(kNoiseFactor * theirs, 1e-6));
    }
  }

  // the loss on their eval maps, and its gradient with respect to each map
  load_state_dict(*model, parity::with_prefix(io, key + ".w."), /*strict=*/true);  // train mode moved the statistics
  model->eval();
  const TargetBatch targets = pad_targets(io.at(key + ".targets"), batch, width, height);
  std::vector<at::Tensor> maps;
  for (int level = 0; level < 3; ++level) maps.push_back(io.at(fmt::format("{}.eval{}", key, level)).clone().requires_grad_(true));
  {
    // Equal up to near-ties: a prediction the two assign differently must have a twin in the same
    // image with outputs within 1e-6 (a network gives saturated or padded regions all but the same
    // values), the two swapped: their costs tie to float32's rounding, and topk picks among ties in
    // its own order.
    const at::Tensor theirs = io.at(key + ".assigned");
    const at::Tensor ours = yolo7::assign(maps, targets);
    std::vector<at::Tensor> flat;
    for (const at::Tensor& map : maps) {
      flat.push_back(map.detach().view({batch, yolo7::kAnchorsPerLevel, -1, map.size(2), map.size(3)}).permute({0, 1, 3, 4, 2})
                         .reshape({batch, -1, map.size(1) / yolo7::kAnchorsPerLevel}));
    }
    const at::Tensor rows = at::cat(flat, 1);
    bool same = ours.sizes() == theirs.sizes();
    std::int64_t differing = 0, tied = 0;
    if (same) {
      const at::Tensor where = ours.ne(theirs).nonzero();
      differing = where.size(0);
      for (std::int64_t i = 0; i < differing; ++i) {
        const std::int64_t b = where[i][0].item<std::int64_t>(), n = where[i][1].item<std::int64_t>();
        bool twin = false;
        for (std::int64_t j = 0; j < differing && !twin; ++j) {
          const std::int64_t b2 = where[j][0].item<std::int64_t>(), m = where[j][1].item<std::int64_t>();
          twin = b2 == b && m != n && ours[b][n].equal(theirs[b][m]) && theirs[b][n].equal(ours[b][m]) && at::allclose(rows[b][n], rows[b][m], 0, 1e-6);
        }
        tied += twin;
      }
      same = tied == differing;
    }
    fmt::print("  yolo7-b assignment: {} positives, the reference {}; {} predictions differ, {} of them near-ties swapped {}\n",
               ours.gt(0).sum().item<std::int64_t>(), theirs.gt(0).sum().item<std::int64_t>(), differing, tied, same ? "ok" : "MISMATCH");
    ok = ok && same;
  }
  const LossTerms terms = yolo7::loss(maps, targets, {});
  terms.total.backward();
  report("loss", parity::difference(terms.total.reshape({1}), io.at(key + ".loss.total_loss")), kTolerance);
  for (const char* name : {"iou_loss", "obj_loss", "cls_loss"}) {
    report(name, parity::difference(terms.part(name).reshape({1}), io.at(fmt::format("{}.loss.{}", key, name))), kTolerance);
  }
  for (int level = 0; level < 3; ++level) {
    const at::Tensor theirs = io.at(fmt::format("{}.map_grad{}", key, level));
    const double scale = theirs.abs().max().item<double>();
    report(fmt::format("level {} map gradient (relative to its largest, {:.3g})", level, scale),
           (maps[level].grad() - theirs).abs().max().item<double>() / scale, kTolerance);
  }

  // through the network (eval mode): every parameter's gradient
  yolo7::loss(model->forward(input), targets, {}).total.backward();
  const parity::Tensors reference = parity::with_prefix(io, key + ".grad.");
  const parity::WorstGradient gradients = parity::largest_relative_gradient_difference(*model, reference);
  report(fmt::format("parameter gradients (largest difference relative to the tensor's largest entry, {} tensors; worst {})",
                     reference.size(), gradients.name),
         gradients.worst, kGradientTolerance);
  return ok;
}

}  // namespace

int main(int argc, char** argv) { return parity::run_cases(argc, argv, "yolo7.safetensors", "input", "YOLOv7", run_case); }
