// Parity with the original YOLOv5 (PyPI yolov5==7.0.14): our network loads its state dict
// unchanged (same names and shapes, strict) and gives the same Detect maps on the same input: in
// eval mode to 1e-4 of its float32 maps, and its decoded output (boxes, objectness x class) to
// 1e-4; in train mode (BatchNorm on the batch's statistics) as close to the same model's float64
// maps as its own float32 maps are, within kNoiseFactor (float32 rounding grows through a network
// normalised by the statistics of two small images: any arithmetic but PyTorch's op-for-op
// differs from its float32 maps by that much, while a real error is orders larger).
// The reference file comes from make_yolov5_reference.py.
//   yolov5_parity_test DIR
#include "models/decode.h"
#include "models/yolo5/model.h"
#include "module_parity.h"
#include "models/yolo_common/anchor_decode.h"

#include <ATen/ATen.h>

using namespace libreyolo::models;

namespace {

constexpr double kEvalTolerance = 1e-4;
constexpr double kNoiseFactor = 10;

// Our [B, anchors x (5 + nc), H, W] map in yolov5's layout [B, anchors, H, W, 5 + nc].
at::Tensor as_yolov5(const at::Tensor& map) {
  const std::int64_t b = map.size(0), h = map.size(2), w = map.size(3), outputs = map.size(1) / yolo5::kAnchorsPerLevel;
  return map.view({b, yolo5::kAnchorsPerLevel, outputs, h, w}).permute({0, 1, 3, 4, 2}).contiguous();
}

bool run_case(const parity::Tensors& io, const std::string& key) {
  const at::Tensor config = io.at(key + ".config");
  const std::string size(1, "nsmlx"[config[0].item<int>()]);
  const int classes = config[1].item<int>();
  yolo5::Model model(size, classes);
  load_state_dict(*model, parity::with_prefix(io, key + ".w."), /*strict=*/true);
  const at::Tensor input = io.at(key + ".input");
  bool ok = true;
  const auto report = [&](const std::string& what, double value, double bound) {
    const bool pass = value <= bound;
    fmt::print("  yolov5{} nc {} {}: {:.3g} (bound {:.3g}) {}\n", size, classes, what, value, bound, pass ? "ok" : "MISMATCH");
    ok = ok && pass;
  };

  torch::NoGradGuard no_grad;
  model->eval();
  const auto maps = model->forward(input);
  if (maps.size() != 4) {
    fmt::print("  yolov5{}: {} outputs, expected 3 levels and the anchors MISMATCH\n", size, maps.size());
    return false;
  }
  parity::Comparison eval;
  for (int level = 0; level < 3; ++level) eval.add(as_yolov5(maps[level]), io.at(fmt::format("{}.eval{}", key, level)));
  report(fmt::format("eval maps ({}/{} bit-identical)", eval.exact, eval.compared), eval.worst, kEvalTolerance);

  // the decoded boxes and scores against Detect's eval output (xywh, objectness, classes)
  const Decoded decoded = decode_yolov5(maps, {8, 16, 32});
  const at::Tensor z = io.at(key + ".decoded");
  const at::Tensor centre = z.slice(2, 0, 2), half = z.slice(2, 2, 4) / 2;
  report("decoded boxes", parity::difference(decoded.boxes, at::cat({centre - half, centre + half}, 2)), kEvalTolerance);
  report("decoded scores", parity::difference(decoded.class_scores, z.slice(2, 5) * z.slice(2, 4, 5)), kEvalTolerance);

  model->train();
  const auto train = model->forward(input);
  for (int level = 0; level < 3; ++level) {
    const at::Tensor truth = io.at(fmt::format("{}.train64_{}", key, level));
    const double theirs = parity::difference(io.at(fmt::format("{}.train{}", key, level)), truth);
    report(fmt::format("train map {} against float64 (theirs {:.3g})", level, theirs),
           parity::difference(as_yolov5(train[level]), truth), std::max(kNoiseFactor * theirs, 1e-6));
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) { return parity::run_cases(argc, argv, "yolov5.safetensors", "input", "YOLOv5", run_case); }
