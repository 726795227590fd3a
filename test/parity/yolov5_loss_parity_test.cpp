// Parity with the original YOLOv5's ComputeLoss (PyPI yolov5==7.0.14), hyp.scratch-low's gains
// scaled as its train.py does: on its own head maps and targets, our matches of each level are
// its build_targets' (same order, same cells, classes and target boxes to 1e-5), the loss and its
// three terms agree to 1e-5, the gradient with respect to every map to 1e-5 of its largest entry,
// and through the network (eval mode on random BatchNorm statistics, our YOLOv5n loading its state
// dict) every parameter's gradient to 1e-4 of the tensor's largest entry. The targets reach our loss as the loader's rows do (normalised, then pixels),
// theirs as normalised rows scaled to the grid: the same boxes up to float32 rounding.
// The reference file comes from make_yolov5_loss_reference.py.
//   yolov5_loss_parity_test DIR
#include "models/targets.h"
#include "models/yolo5/loss.h"
#include "models/yolo5/model.h"
#include "module_parity.h"

#include <ATen/ATen.h>

using namespace libreyolo::models;

namespace {

constexpr double kTolerance = 1e-5;
constexpr double kGradientTolerance = 1e-4;

bool run_case(const parity::Tensors& io, const std::string& key) {
  const at::Tensor config = io.at(key + ".config");
  const int classes = static_cast<int>(config[0].item<double>()), image_size = static_cast<int>(config[1].item<double>());
  yolo5::LossOptions options = yolo5::scaled_gains(0.05, 1.0, 0.5, classes, image_size);
  options.label_smoothing = io.at(key + ".smoothing")[0].item<double>();
  const at::Tensor input = io.at(key + ".input");
  const std::int64_t batch = input.size(0), height = input.size(2), width = input.size(3);
  const TargetBatch targets = pad_targets(io.at(key + ".targets"), batch, width, height);
  bool ok = true;
  const auto report = [&](const std::string& what, double value, double bound) {
    const bool pass = value <= bound;
    fmt::print("  nc {} {}: {:.3g} (bound {:.3g}) {}\n", classes, what, value, bound, pass ? "ok" : "MISMATCH");
    ok = ok && pass;
  };

  yolo5::Model model("n", classes);
  load_state_dict(*model, parity::with_prefix(io, key + ".w."), /*strict=*/true);
  model->eval();  // BatchNorm on its running statistics: nothing the reference did not do moves them
  const at::Tensor anchors = model->forward(input).back().detach();

  // the matches of each level, against build_targets
  const at::Tensor rows = targets.valid.flatten().nonzero().squeeze(1);
  const at::Tensor boxes = targets.boxes_cxcywh.flatten(0, 1).index_select(0, rows);
  const at::Tensor images = rows.div(targets.slots(), "floor");
  const at::Tensor box_classes = targets.classes.flatten().index_select(0, rows);
  for (int level = 0; level < 3; ++level) {
    const std::int64_t stride = yolo5::kStrides[level];
    const yolo5::LevelTargets t =
        yolo5::build_targets(boxes / stride, images, anchors[level], width / stride, height / stride, options.anchor_t);
    const at::Tensor ours = at::stack({t.image, t.anchor, t.gj, t.gi, box_classes.index_select(0, t.box)});
    const at::Tensor theirs = io.at(fmt::format("{}.match{}", key, level));
    const bool same = ours.sizes() == theirs.sizes() && at::equal(ours, theirs);
    fmt::print("  nc {} level {}: {} matches, the reference {} {}\n", classes, level, ours.size(1), theirs.size(1),
               same ? "(same images, anchors, cells and classes)" : "MISMATCH");
    ok = ok && same;
    if (same) report(fmt::format("level {} target boxes", level), parity::difference(t.target, io.at(fmt::format("{}.tbox{}", key, level))), kTolerance);
  }

  // the loss on their maps, and its gradient with respect to each map
  std::vector<at::Tensor> maps;
  for (int level = 0; level < 3; ++level) {
    const at::Tensor theirs = io.at(fmt::format("{}.map{}", key, level));  // [B, anchors, H, W, 5 + nc]
    maps.push_back(theirs.permute({0, 1, 4, 2, 3}).reshape({batch, -1, theirs.size(2), theirs.size(3)}).contiguous().requires_grad_(true));
  }
  maps.push_back(anchors);
  const LossTerms terms = yolo5::loss(maps, targets, options);
  terms.total.backward();
  report("loss", parity::difference(terms.total.reshape({1}), io.at(key + ".loss")), kTolerance);
  const at::Tensor items = io.at(key + ".items");
  const char* names[] = {"box_loss", "obj_loss", "cls_loss"};
  for (int k = 0; k < 3; ++k) report(names[k], parity::difference(terms.part(names[k]).reshape({1}), items.slice(0, k, k + 1)), kTolerance);
  for (int level = 0; level < 3; ++level) {
    const at::Tensor theirs = io.at(fmt::format("{}.map_grad{}", key, level));
    const at::Tensor ours = maps[level].grad().view({batch, yolo5::kAnchorsPerLevel, -1, theirs.size(2), theirs.size(3)}).permute({0, 1, 3, 4, 2});
    const double scale = theirs.abs().max().item<double>();
    report(fmt::format("level {} map gradient (relative to its largest, {:.3g})", level, scale),
           (ours - theirs).abs().max().item<double>() / scale, kTolerance);
  }

  // through the network (eval mode): every parameter's gradient
  const auto network_maps = model->forward(input);
  yolo5::loss(network_maps, targets, options).total.backward();
  const parity::Tensors reference = parity::with_prefix(io, key + ".grad.");
  const parity::WorstGradient gradients = parity::largest_relative_gradient_difference(*model, reference);
  report(fmt::format("parameter gradients (largest difference relative to the tensor's largest entry, {} tensors; worst {})",
                     reference.size(), gradients.name),
         gradients.worst, kGradientTolerance);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  return parity::run_cases(argc, argv, "yolov5_loss.safetensors", "input", "YOLOv5 loss", run_case);
}
