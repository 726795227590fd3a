#include "eval/nms.h"
#include "models/decode.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "catch.h"  // last: see catch.h
#include "models/yolox/decode.h"
#include "models/yolo9/decode.h"

using namespace libreyolo::eval;

namespace {

double iou(const float* a, const float* b) {
  const double w = std::max(0.0, double(std::min(a[2], b[2])) - std::max(a[0], b[0]));
  const double h = std::max(0.0, double(std::min(a[3], b[3])) - std::max(a[1], b[1]));
  const double inter = w * h;
  const double area_a = (a[2] - a[0]) * (a[3] - a[1]);
  const double area_b = (b[2] - b[0]) * (b[3] - b[1]);
  return inter / (area_a + area_b - inter);
}

// The textbook definition: walk by descending score, keep a box unless it overlaps a kept one.
std::vector<std::int64_t> brute_force(const at::Tensor& boxes, const at::Tensor& scores, double threshold) {
  std::vector<std::int64_t> order(static_cast<std::size_t>(boxes.size(0)));
  std::iota(order.begin(), order.end(), 0);
  const float* s = scores.data_ptr<float>();
  std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return s[a] > s[b]; });
  const float* b = boxes.data_ptr<float>();
  std::vector<std::int64_t> kept;
  for (const auto i : order) {
    bool overlaps = false;
    for (const auto k : kept) overlaps = overlaps || iou(b + 4 * i, b + 4 * k) > threshold;
    if (!overlaps) kept.push_back(i);
  }
  return kept;
}

at::Tensor random_boxes(std::int64_t count, std::uint64_t seed) {
  std::mt19937 engine(static_cast<unsigned>(seed));
  std::uniform_real_distribution<float> position(0, 100), size(5, 40);
  std::vector<float> values;
  for (std::int64_t i = 0; i < count; ++i) {
    const float x = position(engine), y = position(engine);
    values.insert(values.end(), {x, y, x + size(engine), y + size(engine)});
  }
  return at::tensor(values).reshape({count, 4});
}

}  // namespace

TEST_CASE("NMS keeps exactly what the brute-force definition keeps", "[nms]") {
  for (std::uint64_t seed = 0; seed < 20; ++seed) {
    const at::Tensor boxes = random_boxes(200, seed);
    // Seeded, and with ties on purpose (scores in steps of 1/64): ties must break by input order.
    std::mt19937 engine(static_cast<unsigned>(seed + 1000));
    std::uniform_int_distribution<int> step(0, 63);
    std::vector<float> values(200);
    for (auto& v : values) v = static_cast<float>(step(engine)) / 64.f;
    const at::Tensor scores = at::tensor(values);
    for (const double threshold : {0.3, 0.5, 0.7}) {
      const at::Tensor kept = nms(boxes, scores, threshold);
      const auto expected = brute_force(boxes, scores, threshold);
      INFO("seed " << seed << " iou " << threshold);
      REQUIRE(kept.size(0) == static_cast<std::int64_t>(expected.size()));
      for (std::size_t i = 0; i < expected.size(); ++i) CHECK(kept[static_cast<long>(i)].item<std::int64_t>() == expected[i]);
    }
  }
}

TEST_CASE("class-aware NMS: other classes never suppress", "[nms]") {
  const at::Tensor boxes = at::tensor({10.f, 10.f, 50.f, 50.f, 11.f, 11.f, 51.f, 51.f, 10.f, 10.f, 50.f, 50.f}).reshape({3, 4});
  const at::Tensor scores = at::tensor({0.9f, 0.8f, 0.7f});
  CHECK(batched_nms(boxes, scores, at::tensor({0, 0, 1}), 0.5).size(0) == 2);
  CHECK(batched_nms(boxes, scores, at::tensor({0, 0, 0}), 0.5).size(0) == 1);
  CHECK(batched_nms(boxes, scores, at::tensor({0, 1, 2}), 0.5).size(0) == 3);
}

TEST_CASE("post-processing: confidence, max_det and multi-label", "[nms]") {
  // one image, three anchors, two classes
  const at::Tensor boxes = at::tensor({0.f, 0.f, 10.f, 10.f, 100.f, 100.f, 120.f, 120.f, 200.f, 200.f, 210.f, 210.f}).reshape({1, 3, 4});
  const at::Tensor scores = at::tensor({0.9f, 0.6f, 0.1f, 0.05f, 0.5f, 0.02f}).reshape({1, 3, 2});
  NmsOptions options;
  options.confidence = 0.3;
  auto single = non_max_suppression(boxes, scores, options)[0];
  REQUIRE(single.size(0) == 2);  // anchor 0 (class 0) and anchor 2 (class 0); anchor 1 is below 0.3
  CHECK(single[0][4].item<float>() == Approx(0.9));
  CHECK(single[1][5].item<float>() == Approx(0));
  options.multi_label = true;
  auto multi = non_max_suppression(boxes, scores, options)[0];
  CHECK(multi.size(0) == 3);  // anchor 0 as class 0 and class 1, anchor 2 as class 0
  options.max_detections = 1;
  CHECK(non_max_suppression(boxes, scores, options)[0].size(0) == 1);
  options.confidence = 0.99;
  CHECK(non_max_suppression(boxes, scores, options)[0].size(0) == 0);
}

TEST_CASE("YOLOX decode: (raw + cell) x stride centres, exp(raw) x stride sizes, obj x cls", "[nms]") {
  at::Tensor map = at::zeros({1, 5 + 2, 4, 4});
  // cell x=1, y=2: centre (1+0, 2+0)*8 = (8, 16); size exp(log 2)*8 = 16
  map[0][2][2][1] = std::log(2.0);
  map[0][3][2][1] = std::log(2.0);
  map[0][4][2][1] = 0.5;  // objectness
  map[0][6][2][1] = 0.8;  // class 1
  const libreyolo::models::Decoded decoded = libreyolo::models::decode_yolox({map}, {8});
  const std::int64_t anchor = 2 * 4 + 1;
  const auto box = decoded.boxes[0][anchor];
  CHECK(box[0].item<float>() == Approx(0));
  CHECK(box[1].item<float>() == Approx(8));
  CHECK(box[2].item<float>() == Approx(16));
  CHECK(box[3].item<float>() == Approx(24));
  CHECK(decoded.class_scores[0][anchor][1].item<float>() == Approx(0.4));
}

TEST_CASE("YOLOv9 decode: cell centres minus/plus expected bin distances, times stride", "[nms]") {
  const int reg_max = 16;
  at::Tensor map = at::zeros({1, 4 * reg_max + 3, 2, 2});
  for (int side = 0; side < 4; ++side) map[0][side * reg_max + 2].fill_(50.0);  // all mass on bin 2
  map[0][4 * reg_max + 1].fill_(10.0);                                        // class 1 logit
  const libreyolo::models::Decoded decoded = libreyolo::models::decode_yolo9({map}, reg_max, {16});
  const auto box = decoded.boxes[0][3];  // cell x=1, y=1: centre (1.5, 1.5)
  CHECK(box[0].item<float>() == Approx((1.5 - 2) * 16).margin(1e-3));
  CHECK(box[3].item<float>() == Approx((1.5 + 2) * 16).margin(1e-3));
  CHECK(decoded.class_scores[0][3][1].item<float>() == Approx(1.0 / (1.0 + std::exp(-10.0))));
  CHECK(decoded.class_scores.sizes() == at::IntArrayRef({1, 4, 3}));
}
