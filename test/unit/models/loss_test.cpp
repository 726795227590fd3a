// Assigners and losses on hand-built cases whose right answer can be worked out on paper: a
// 64×64 input has 8×8 + 4×4 + 2×2 anchors (strides 8, 16, 32); anchor r·8 + c of the first
// level is centred at (8c + 4, 8r + 4).
#include "models/anchors.h"
#include "models/targets.h"
#include "models/yolo9/loss.h"
#include "models/yolo9/model.h"
#include "models/yolox/loss.h"
#include "models/yolox/model.h"

#include <torch/torch.h>

#include <cmath>
#include <set>

#include "catch.h"  // last: see catch.h

using namespace libreyolo::models;

namespace {

AnchorPoints anchors_for(int width, int height) {
  std::vector<at::Tensor> maps;
  for (int stride : {8, 16, 32}) maps.push_back(at::zeros({1, 1, height / stride, width / stride}));
  return anchor_points(maps, {8, 16, 32});
}

AnchorPoints anchors_for(int size) { return anchors_for(size, size); }

// counts[i] random boxes in image i of a width×height input: sides log-uniform from `smallest` to
// `smallest`·`spread` pixels, anywhere inside, classes below `classes`.
TargetBatch random_boxes(const std::vector<int>& counts, int classes, double smallest, double spread, int width, int height) {
  std::vector<at::Tensor> rows;
  for (std::size_t image = 0; image < counts.size(); ++image) {
    const std::int64_t n = counts[image];
    if (n == 0) continue;
    const at::Tensor size = at::exp(at::rand({n, 2}) * std::log(spread)) * smallest /
                            at::tensor({static_cast<float>(width), static_cast<float>(height)});
    const at::Tensor centre = size / 2 + at::rand({n, 2}) * (1 - size);
    rows.push_back(at::cat({at::full({n, 1}, static_cast<float>(image)), at::randint(classes, {n, 1}).to(at::kFloat),
                            centre, size}, 1));
  }
  return pad_targets(at::cat(rows), static_cast<std::int64_t>(counts.size()), width, height);
}

// One image's boxes as loader rows (class, x1, y1, x2, y2 in pixels of a size×size input).
TargetBatch boxes(const std::vector<std::array<float, 5>>& rows, int size, int images = 1) {
  at::Tensor t = at::zeros({static_cast<std::int64_t>(rows.size()), 6});
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& [cls, x1, y1, x2, y2] = rows[i];
    const float s = static_cast<float>(size);
    t[i] = at::tensor({0.f, cls, (x1 + x2) / 2 / s, (y1 + y2) / 2 / s, (x2 - x1) / s, (y2 - y1) / s});
  }
  return pad_targets(t, images, size, size);
}

std::set<std::int64_t> foreground_of(const at::Tensor& mask) {
  std::set<std::int64_t> out;
  const at::Tensor index = mask[0].nonzero().flatten();
  for (std::int64_t i = 0; i < index.numel(); ++i) out.insert(index[i].item<std::int64_t>());
  return out;
}

// CIoU of two same-aspect boxes (the aspect term is 0): IoU − centre distance² / diagonal².
double same_aspect_ciou(double inter, double union_area, double centre2, double diagonal2) {
  return inter / union_area - centre2 / diagonal2;
}

// Predicted xyxy boxes far from everything, except the listed anchors.
at::Tensor predicted_xyxy(std::int64_t anchors, const std::vector<std::pair<int, std::array<float, 4>>>& set) {
  at::Tensor b = at::tensor({0.f, 0.f, 1.f, 1.f}).repeat({1, anchors, 1});
  for (const auto& [i, box] : set) b[0][i] = at::tensor({box[0], box[1], box[2], box[3]});
  return b;
}

at::Tensor predicted_cxcywh(std::int64_t anchors, const std::vector<std::pair<int, std::array<float, 4>>>& set) {
  at::Tensor b = at::tensor({1000.f, 1000.f, 1.f, 1.f}).repeat({1, anchors, 1});
  for (const auto& [i, box] : set) b[0][i] = at::tensor({box[0], box[1], box[2], box[3]});
  return b;
}

at::Tensor rows_of(std::vector<float> values) { return at::tensor(values); }

// TAL in the form a section picks: the dense [B, G, A] tensors (what a GPU and a graph run) or
// the CPU's loops over candidate pairs (what tal_assign runs on the CPU).
yolo9::TalAssignment tal_in(bool dense, const at::Tensor& logits, const at::Tensor& boxes, const AnchorPoints& points,
                            const TargetBatch& targets, const yolo9::TalOptions& options = {}) {
  if (dense) return yolo9::tal_assign_dense(logits, boxes, points.centres, points.strides, targets, options);
  auto sparse = yolo9::tal_assign_sparse(logits, boxes, points.centres, points.strides, targets, options);
  REQUIRE(sparse.has_value());
  return *sparse;
}

}  // namespace

TEST_CASE("TAL picks the aligned anchors inside the box and scores them by alignment", "[tal]") {
  const bool dense = GENERATE(false, true);
  CAPTURE(dense);
  const AnchorPoints points = anchors_for(64);
  const std::int64_t anchors = points.centres.size(0);
  REQUIRE(anchors == 84);
  // Box (16,16)-(48,48), class 1. Anchor 18 (centre 20,20) predicts it exactly; anchor 27
  // (28,28) predicts it shifted 4 px right: IoU 896/1152, centre distance² 16, diagonal² 2320.
  const auto targets = boxes({{1, 16, 16, 48, 48}}, 64);
  const at::Tensor predicted = predicted_xyxy(anchors, {{18, {16, 16, 48, 48}}, {27, {20, 16, 52, 48}}});
  const auto result = tal_in(dense, at::zeros({1, anchors, 2}), predicted, points, targets);
  CHECK(foreground_of(result.foreground) == std::set<std::int64_t>{18, 27});
  const double ciou = same_aspect_ciou(896, 1152, 16, 2320);
  // Score target = alignment / best alignment × best IoU of the box = ciou⁶ for anchor 27.
  CHECK(result.target_scores[0][18][1].item<double>() == Approx(1.0).epsilon(1e-5));
  CHECK(result.target_scores[0][27][1].item<double>() == Approx(std::pow(ciou, 6)).epsilon(1e-4));
  CHECK(result.target_scores[0][27][0].item<double>() == 0.0);
  CHECK(result.target_scores.sum().item<double>() == Approx(1.0 + std::pow(ciou, 6)).epsilon(1e-4));
  CHECK(at::equal(result.target_boxes[0][27], at::tensor({16.f, 16.f, 48.f, 48.f})));
}

TEST_CASE("TAL gives a box with no candidate anchor its best-aligned anchor", "[tal]") {
  const bool dense = GENERATE(false, true);
  CAPTURE(dense);
  const AnchorPoints points = anchors_for(64);
  const std::int64_t anchors = points.centres.size(0);
  // (9,9)-(11,11) holds no anchor centre; anchor 9 (centre 12,12) predicts it exactly.
  const auto targets = boxes({{0, 9, 9, 11, 11}}, 64);
  const auto result = tal_in(dense, at::zeros({1, anchors, 2}), predicted_xyxy(anchors, {{9, {9, 9, 11, 11}}}), points, targets);
  CHECK(foreground_of(result.foreground) == std::set<std::int64_t>{9});
  CHECK(result.target_scores[0][9][0].item<double>() == Approx(1.0).epsilon(1e-5));
}

TEST_CASE("TAL gives an anchor claimed by two boxes to the one it overlaps most", "[tal]") {
  const bool dense = GENERATE(false, true);
  CAPTURE(dense);
  const AnchorPoints points = anchors_for(64);
  const std::int64_t anchors = points.centres.size(0);
  // Anchor 18 predicts (16,16)-(44,44): CIoU 784/1024 − 8/2048 with box A (16,16)-(48,48),
  // 576/784 − 8/1568 with box B (16,16)-(40,40). It goes to A; B is left without an anchor.
  const auto targets = boxes({{0, 16, 16, 48, 48}, {1, 16, 16, 40, 40}}, 64);
  const auto result = tal_in(dense, at::zeros({1, anchors, 2}), predicted_xyxy(anchors, {{18, {16, 16, 44, 44}}}), points, targets);
  CHECK(foreground_of(result.foreground) == std::set<std::int64_t>{18});
  CHECK(result.gt_index[0][18].item<std::int64_t>() == 0);
  CHECK(result.target_scores[0][18][0].item<double>() == Approx(same_aspect_ciou(784, 1024, 8, 2048)).epsilon(1e-4));
  CHECK(result.target_scores[0][18][1].item<double>() == 0.0);
}

TEST_CASE("TAL leaves out anchors more than reg_max - 1.01 strides from a side", "[tal]") {
  const bool dense = GENERATE(false, true);
  CAPTURE(dense);
  // A box filling a 320×320 input: a stride-8 anchor is at least 160 px = 20 strides from some
  // side (> 14.99), so only stride 16 and 32 anchors may take it; top-k keeps 10.
  const AnchorPoints points = anchors_for(320);
  const std::int64_t anchors = points.centres.size(0);
  const auto targets = boxes({{0, 0, 0, 320, 320}}, 320);
  const at::Tensor predicted = at::tensor({0.f, 0.f, 320.f, 320.f}).repeat({1, anchors, 1});
  const auto result = tal_in(dense, at::zeros({1, anchors, 1}), predicted, points, targets);
  const auto chosen = foreground_of(result.foreground);
  CHECK(chosen.size() == 10);
  for (const std::int64_t i : chosen) CHECK(points.strides[i].item<float>() >= 16.f);
}

TEST_CASE("TAL's CPU form assigns what the dense form assigns", "[tal]") {
  // 320×256 input, 4 images with 0, 3, 25 and 60 boxes from 2 to 300 px (the smallest hold no
  // anchor centre: the whole-row fallback), predictions near the anchors (overlapping boxes
  // claim the same anchors), random class scores; and a topk larger than some boxes' candidates.
  at::manual_seed(7);
  const AnchorPoints points = anchors_for(320, 256);
  const std::int64_t anchors = points.centres.size(0), classes = 5;
  const TargetBatch targets = random_boxes({0, 3, 25, 60}, classes, 2, 150, 320, 256);
  const at::Tensor sides = (at::rand({4, anchors, 4}) * 5 + 0.5) * points.strides.view({1, -1, 1});
  const at::Tensor centres = points.centres.unsqueeze(0);
  const at::Tensor predicted = at::cat({centres - sides.narrow(2, 0, 2), centres + sides.narrow(2, 2, 2)}, 2);
  const at::Tensor logits = at::randn({4, anchors, classes}) * 2;
  const int topk = GENERATE(10, 40);
  CAPTURE(topk);
  yolo9::TalOptions options;
  options.topk = topk;

  const auto dense = tal_in(true, logits, predicted, points, targets, options);
  const auto sparse = tal_in(false, logits, predicted, points, targets, options);
  REQUIRE(dense.foreground.sum().item<std::int64_t>() > 200);
  CHECK(at::equal(sparse.foreground, dense.foreground));
  CHECK(at::equal(sparse.gt_index * sparse.foreground, dense.gt_index * dense.foreground));
  CHECK(at::allclose(sparse.target_scores, dense.target_scores, 1e-5, 1e-6));
  CHECK(at::equal(sparse.target_boxes, dense.target_boxes));
}

TEST_CASE("TAL's CPU form declines anchors that are not anchor_points' grid", "[tal]") {
  const AnchorPoints points = anchors_for(64);
  const at::Tensor shuffled = points.centres.flip(0);
  const auto targets = boxes({{0, 16, 16, 48, 48}}, 64);
  const std::int64_t anchors = points.centres.size(0);
  CHECK_FALSE(yolo9::tal_assign_sparse(at::zeros({1, anchors, 1}), at::zeros({1, anchors, 4}), shuffled,
                                       points.strides, targets, {})
                  .has_value());
}

TEST_CASE("SimOTA per image on the CPU assigns what the dense form assigns", "[simota]") {
  // 320×256 input, 4 images with 0, 2, 20 and 50 boxes from 3 to 250 px, predictions near each
  // anchor, random scores; both variants (the original's in-box candidates reach further).
  at::manual_seed(11);
  const AnchorPoints points = anchors_for(320, 256);
  const std::int64_t anchors = points.centres.size(0), classes = 4;
  const TargetBatch targets = random_boxes({0, 2, 20, 50}, classes, 3, 80, 320, 256);
  const at::Tensor strides = points.strides.view({1, -1, 1});
  const at::Tensor predicted = at::cat({points.centres.unsqueeze(0) + at::randn({4, anchors, 2}) * strides,
                                        (at::rand({4, anchors, 2}) * 6 + 0.5) * strides}, 2);
  const at::Tensor logits = at::randn({4, anchors, classes}) * 2, objectness = at::randn({4, anchors});
  const auto variant = GENERATE(yolo_common::SimOtaVariant::Current, yolo_common::SimOtaVariant::Original);
  CAPTURE(static_cast<int>(variant));
  const auto dense =
      yolo_common::simota_assign(logits, objectness, predicted, points.cells, points.strides, targets, variant, /*dense=*/true);
  const auto per_image = yolo_common::simota_assign(logits, objectness, predicted, points.cells, points.strides, targets, variant);
  REQUIRE(dense.foreground.sum().item<std::int64_t>() > 50);
  CHECK(at::equal(per_image.foreground, dense.foreground));
  CHECK(at::equal(per_image.gt_index, dense.gt_index));
  CHECK(at::allclose(per_image.iou, dense.iou, 1e-6, 1e-7));
}

TEST_CASE("SimOTA takes dynamic_k = floor(sum of the best IoUs) cheapest anchors", "[simota]") {
  const AnchorPoints points = anchors_for(64);
  const std::int64_t anchors = points.centres.size(0);
  // Box centre (32,32), 16×16: anchors 27 (28,28), 28, 35, 36 are within 1.5 strides at stride 8.
  const auto targets = boxes({{0, 24, 24, 40, 40}}, 64);
  const at::Tensor logits = at::zeros({1, anchors, 2}), objectness = at::zeros({1, anchors});
  SECTION("one anchor when the IoUs sum below 2") {
    // 27 exact (IoU 1), 36 shifted 2 px (IoU 224/288): k = 1, the exact one.
    const auto result = yolo_common::simota_assign(logits, objectness,
                                             predicted_cxcywh(anchors, {{27, {32, 32, 16, 16}}, {36, {34, 32, 16, 16}}}),
                                             points.cells, points.strides, targets);
    CHECK(foreground_of(result.foreground) == std::set<std::int64_t>{27});
    CHECK(result.iou[0][27].item<double>() == Approx(1.0));
  }
  SECTION("two anchors when they sum to 2.46") {
    // + 28 shifted 3 px (IoU 208/304): k = 2, the two highest IoUs (the lowest costs).
    const auto result = yolo_common::simota_assign(
        logits, objectness,
        predicted_cxcywh(anchors, {{27, {32, 32, 16, 16}}, {36, {34, 32, 16, 16}}, {28, {29, 32, 16, 16}}}),
        points.cells, points.strides, targets);
    CHECK(foreground_of(result.foreground) == std::set<std::int64_t>{27, 36});
    CHECK(result.iou[0][36].item<double>() == Approx(224.0 / 288.0).epsilon(1e-5));
  }
}

TEST_CASE("SimOTA's original prior also counts in-box anchors beyond the centre radius", "[simota]") {
  const AnchorPoints points = anchors_for(64);
  const std::int64_t anchors = points.centres.size(0);
  // Box centre (32,32), 60×60. Anchor 0 (4,4) is inside it but 28 px from the centre: outside
  // 1.5 and 2.5 strides. It predicts the box exactly; 27 and 36 predict it with IoU 0.818 and 0.765.
  const auto targets = boxes({{0, 2, 2, 62, 62}}, 64);
  const at::Tensor predicted =
      predicted_cxcywh(anchors, {{0, {32, 32, 60, 60}}, {27, {38, 32, 60, 60}}, {36, {32, 40, 60, 60}}});
  const at::Tensor logits = at::zeros({1, anchors, 1}), objectness = at::zeros({1, anchors});
  // Current: anchor 0 is no candidate, k = ⌊0.818 + 0.765⌋ = 1.
  const auto current = yolo_common::simota_assign(logits, objectness, predicted, points.cells, points.strides, targets,
                                            yolo_common::SimOtaVariant::Current);
  CHECK(foreground_of(current.foreground) == std::set<std::int64_t>{27});
  // Original: anchor 0 is a candidate (so k = ⌊2.58⌋ = 2) but pays the 1e5 penalty for being
  // outside the centre region, so the two cheapest are still 27 and 36.
  const auto original = yolo_common::simota_assign(logits, objectness, predicted, points.cells, points.strides, targets,
                                             yolo_common::SimOtaVariant::Original);
  CHECK(foreground_of(original.foreground) == std::set<std::int64_t>{27, 36});
}

TEST_CASE("SimOTA gives an anchor claimed by two boxes to the cheaper one", "[simota]") {
  const AnchorPoints points = anchors_for(64);
  const std::int64_t anchors = points.centres.size(0);
  // Anchor 27 predicts (32.5,32) 16×16: IoU 248/264 with box A (centre 32,32), 232/280 with box
  // B (centre 34,32). Every other prediction misses both, so both boxes pick 27; A keeps it.
  const auto targets = boxes({{0, 24, 24, 40, 40}, {0, 26, 24, 42, 40}}, 64);
  const auto result = yolo_common::simota_assign(at::zeros({1, anchors, 1}), at::zeros({1, anchors}),
                                           predicted_cxcywh(anchors, {{27, {32.5, 32, 16, 16}}}), points.cells,
                                           points.strides, targets);
  CHECK(foreground_of(result.foreground) == std::set<std::int64_t>{27});
  CHECK(result.gt_index[0][27].item<std::int64_t>() == 0);
  CHECK(result.iou[0][27].item<double>() == Approx(248.0 / 264.0).epsilon(1e-5));
}

TEST_CASE("SimOTA stays finite when a prediction collapses to zero area beside empty target slots", "[simota]") {
  // Image 0 has one box and so one empty slot (a zero box); image 1 has two. Anchor 28 of each
  // predicts a 0x0 box (YOLOv7's (2 sigmoid)^2 underflows to 0): its IoU with the empty slot is 0/0,
  // which must not reach the matched IoU, the class target or the loss (a YOLOv7-b over-fit went
  // NaN at its tenth epoch on exactly this).
  const AnchorPoints points = anchors_for(64);
  const std::int64_t anchors = points.centres.size(0);
  const at::Tensor rows = at::tensor({0.f, 0.f, 0.5f, 0.5f, 0.25f, 0.25f,  //
                                      1.f, 1.f, 0.5f, 0.5f, 0.25f, 0.25f,  //
                                      1.f, 0.f, 0.25f, 0.25f, 0.2f, 0.2f}).view({3, 6});
  const TargetBatch targets = pad_targets(rows, 2, 64, 64);
  const at::Tensor one = predicted_cxcywh(anchors, {{27, {32, 32, 16, 16}}, {28, {32, 32, 0, 0}}});
  const at::Tensor predicted = at::cat({one, one}, 0);
  const at::Tensor logits = at::zeros({2, anchors, 2}), objectness = at::zeros({2, anchors});
  const bool dense = GENERATE(false, true);
  CAPTURE(dense);
  const auto result = yolo_common::simota_assign(logits, objectness, predicted, points.cells, points.strides, targets,
                                           yolo_common::SimOtaVariant::Current, dense);
  CHECK(at::isfinite(result.iou).all().item<bool>());
  CHECK(result.foreground[0][27].item<bool>());
  CHECK(result.iou[0][27].item<double>() == Approx(1.0));

  const at::Tensor boxes = predicted.clone().requires_grad_(true);
  const at::Tensor class_logits = logits.clone().requires_grad_(true);
  const LossTerms terms = yolo_common::simota_loss(
      {.boxes = boxes, .objectness = objectness, .class_logits = class_logits, .cells = points.cells, .strides = points.strides},
      targets, {.use_l1 = false});
  REQUIRE(std::isfinite(terms.total.item<double>()));
  terms.total.backward();
  CHECK(at::isfinite(boxes.grad()).all().item<bool>());
  CHECK(at::isfinite(class_logits.grad()).all().item<bool>());
}

namespace {

template <typename Model, typename LossFn>
void check_training_step(Model model, LossFn loss_fn, const TargetBatch& targets, bool expect_foreground) {
  model->train();
  const auto maps = model->forward(torch::rand({2, 3, 64, 64}));
  const auto terms = loss_fn(maps, targets);
  REQUIRE(std::isfinite(terms.total.template item<double>()));
  terms.total.backward();
  bool any_nonzero = false;
  for (const auto& p : model->parameters()) {
    REQUIRE(p.grad().defined());
    REQUIRE(torch::isfinite(p.grad()).all().template item<bool>());
    any_nonzero = any_nonzero || p.grad().abs().sum().template item<double>() > 0;
  }
  CHECK(any_nonzero);
  const double foreground = terms.part("num_fg").template item<double>();
  CHECK((foreground > 0) == expect_foreground);
}

}  // namespace

TEST_CASE("YOLOv9 loss: finite gradients with boxes and with an empty batch", "[loss]") {
  const auto loss_fn = [](const std::vector<at::Tensor>& maps, const TargetBatch& t) {
    return yolo9::loss(maps, t, {});
  };
  // Image 0 has two boxes, image 1 none.
  const TargetBatch some = pad_targets(rows_of({0, 1, 0.5, 0.5, 0.4, 0.3, 0, 2, 0.3, 0.6, 0.2, 0.5}).view({2, 6}), 2, 64, 64);
  check_training_step(yolo9::Model("t", 3), loss_fn, some, true);
  const TargetBatch none = pad_targets(at::zeros({0, 6}), 2, 64, 64);
  auto model = yolo9::Model("t", 3);
  check_training_step(model, loss_fn, none, false);
  const auto terms = yolo9::loss(model->forward(torch::rand({2, 3, 64, 64})), none, {});
  CHECK(terms.part("box_loss").item<double>() == 0.0);
  CHECK(terms.part("dfl_loss").item<double>() == 0.0);
  CHECK(terms.part("cls_loss").item<double>() > 0.0);
}

TEST_CASE("YOLOv9 loss: empty target slots change neither the loss nor its gradients (a captured loss's fixed G)", "[loss]") {
  torch::manual_seed(5);
  auto model = yolo9::Model("t", 3);
  model->train();
  const at::Tensor x = torch::rand({3, 3, 64, 64});
  const at::Tensor rows = rows_of({0, 1, 0.5, 0.5, 0.4, 0.3, 0, 2, 0.3, 0.6, 0.2, 0.5, 2, 0, 0.7, 0.2, 0.3, 0.3}).view({3, 6});
  std::vector<std::vector<at::Tensor>> grads;
  std::vector<LossTerms> terms;
  for (const std::int64_t slots : {0, 2, 7, 32}) {
    const TargetBatch targets = pad_targets(rows, 3, 64, 64, slots);
    CHECK(targets.slots() == std::max<std::int64_t>(slots, 2));
    for (auto& p : model->parameters()) p.mutable_grad() = at::Tensor();
    terms.push_back(yolo9::loss(model->forward(x), targets, {}));
    terms.back().total.backward();
    grads.emplace_back();
    for (auto& p : model->parameters()) grads.back().push_back(p.grad().clone());
  }
  for (std::size_t k = 1; k < terms.size(); ++k) {
    CHECK(terms[k].total.item<double>() == Approx(terms[0].total.item<double>()).epsilon(1e-6));
    for (const auto& [name, value] : terms[0].parts) {
      INFO(name);
      CHECK(terms[k].part(name).item<double>() == Approx(value.item<double>()).epsilon(1e-6));
    }
    for (std::size_t i = 0; i < grads[0].size(); ++i) CHECK(at::allclose(grads[k][i], grads[0][i], 1e-5, 1e-7));
  }
}

TEST_CASE("YOLOv9 loss: the CPU's foreground-only box terms equal the dense ones, values and gradients", "[loss]") {
  // Random head maps of a 320×256 input, 4 images with 0, 3, 25 and 60 boxes from 4 to 240 px.
  at::manual_seed(13);
  const int classes = 5, reg_max = 16;
  const TargetBatch targets = random_boxes({0, 3, 25, 60}, classes, 4, 60, 320, 256);
  std::vector<at::Tensor> maps;
  for (int stride : {8, 16, 32}) {
    maps.push_back((at::randn({4, 4 * reg_max + classes, 256 / stride, 320 / stride}) * 2).requires_grad_());
  }
  const auto run = [&](bool dense) {
    yolo9::LossOptions options;
    options.dense = dense;
    for (auto& map : maps) map.mutable_grad().reset();
    LossTerms terms = yolo9::loss(maps, targets, options);
    terms.total.backward();
    std::vector<at::Tensor> grads;
    for (const auto& map : maps) grads.push_back(map.grad().clone());
    return std::pair{terms, grads};
  };
  const auto [dense, dense_grads] = run(true);
  const auto [foreground_only, grads] = run(false);
  REQUIRE(dense.part("num_fg").item<double>() > 20);
  REQUIRE(dense.part("box_loss").item<double>() > 0);
  CHECK(foreground_only.total.item<double>() == Approx(dense.total.item<double>()).epsilon(1e-5));
  for (const auto& [name, value] : dense.parts) {
    INFO(name);
    CHECK(foreground_only.part(name).item<double>() == Approx(value.item<double>()).epsilon(1e-5));
  }
  for (std::size_t level = 0; level < maps.size(); ++level) {
    INFO("level " << level);
    CHECK(at::allclose(grads[level], dense_grads[level], 1e-4, 1e-7));
  }
}

TEST_CASE("YOLOX loss: finite gradients with boxes, L1 on, and with an empty batch", "[loss]") {
  const auto loss_fn = [](const std::vector<at::Tensor>& maps, const TargetBatch& t) {
    yolo_common::SimOtaLossOptions options;
    options.use_l1 = true;
    return yolox::loss(maps, t, options);
  };
  const TargetBatch some = pad_targets(rows_of({1, 0, 0.5, 0.5, 0.4, 0.3, 1, 2, 0.3, 0.6, 0.2, 0.5}).view({2, 6}), 2, 64, 64);
  check_training_step(yolox::Model("n", 3), loss_fn, some, true);
  const TargetBatch none = pad_targets(at::zeros({0, 6}), 2, 64, 64);
  check_training_step(yolox::Model("n", 3), loss_fn, none, true);  // num_fg reports max(fg, 1) / boxes
  const auto terms = loss_fn(yolox::Model("n", 3)->forward(torch::rand({2, 3, 64, 64})), none);
  CHECK(terms.part("iou_loss").item<double>() == 0.0);
  CHECK(terms.part("l1_loss").item<double>() == 0.0);
  CHECK(terms.part("obj_loss").item<double>() > 0.0);
}

TEST_CASE("pad_targets lays boxes out per image and rejects a bad image index", "[loss]") {
  const at::Tensor rows = rows_of({1, 3, 0.5, 0.5, 0.5, 0.25, 1, 4, 0.25, 0.25, 0.5, 0.5}).view({2, 6});
  const TargetBatch t = pad_targets(rows, 3, 64, 32);
  CHECK(t.slots() == 2);
  CHECK(t.valid.sum(1).equal(at::tensor({0, 2, 0}, at::kLong)));
  CHECK(t.classes[1].equal(at::tensor({3, 4}, at::kLong)));
  CHECK(at::allclose(t.boxes_xyxy[1][0], at::tensor({16.f, 12.f, 48.f, 20.f})));
  CHECK(at::allclose(t.boxes_cxcywh[1][1], at::tensor({16.f, 8.f, 32.f, 16.f})));
  CHECK_THROWS(pad_targets(rows, 1, 64, 64));
}
