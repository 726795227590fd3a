#include "models/model_name.h"
#include "models/registry.h"
#include "models/safetensors.h"
#include "models/yolov5/autoanchor.h"
#include "models/yolov5/loss.h"
#include "models/yolov5/model.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <map>

#include "catch.h"  // last: see catch.h

using namespace libreyolo::models;

TEST_CASE("AutoAnchor's fit: a box counts where both sides are within anchor_t of an anchor's", "[yolov5]") {
  const at::Tensor anchors = at::tensor({10.f, 13.f, 100.f, 100.f}).view({2, 2});
  // (10, 13) matches the first exactly; (20, 13) is 2x wide: still within 4; (100, 10) is 10x
  // wide of the first and 10x flat of the second: no anchor
  const at::Tensor sizes = at::tensor({10.f, 13.f, 20.f, 13.f, 100.f, 10.f, 200.f, 150.f}).view({4, 2});
  const auto fit = yolov5::anchor_fit(sizes, anchors, 4.0);
  CHECK(fit.best_possible_recall == Approx(0.75));
  // anchors past the threshold per box: 1 (the first), 1, 0, 1 (the second only: 150/13 > 4)
  CHECK(fit.anchors_per_target == Approx(0.75));
  CHECK(yolov5::anchor_fit(sizes, anchors, 11.0).best_possible_recall == Approx(1.0));
}

TEST_CASE("AutoAnchor evolves anchors that fit labels the default anchors miss", "[yolov5]") {
  // wide and tall boxes no default anchor reaches within 4x on both sides
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(7);
  const at::Tensor wide = at::stack({at::rand({150}, generator) * 60 + 270, at::rand({150}, generator) * 4 + 8}, 1);
  const at::Tensor tall = at::stack({at::rand({150}, generator) * 4 + 8, at::rand({150}, generator) * 60 + 270}, 1);
  const at::Tensor sizes = at::cat({wide, tall});
  at::Tensor defaults = at::empty({9, 2});
  for (int level = 0; level < 3; ++level) {
    for (int k = 0; k < 6; ++k) defaults[level * 3 + k / 2][k % 2] = yolov5::kDefaultAnchors[level][k];
  }
  const double before = yolov5::anchor_fit(sizes, defaults, 4.0).best_possible_recall;
  CHECK(before < 0.5);
  const at::Tensor evolved = yolov5::evolve_anchors(sizes, 9, 640, 4.0, 300, 1);
  REQUIRE(evolved.sizes() == c10::IntArrayRef{9, 2});
  CHECK(yolov5::anchor_fit(sizes, evolved, 4.0).best_possible_recall == Approx(1.0));
  CHECK(evolved.prod(1).diff().ge(0).all().item<bool>());  // smallest area first
  CHECK(evolved.ge(2.0).all().item<bool>());
  CHECK(at::equal(evolved, yolov5::evolve_anchors(sizes, 9, 640, 4.0, 300, 1)));  // the seed decides
}

TEST_CASE("YOLOv5's gains scale with levels, classes and image size as its train.py's", "[yolov5]") {
  const auto options = yolov5::scaled_gains(0.05, 1.0, 0.5, 20, 320);
  CHECK(options.box_gain == Approx(0.05));
  CHECK(options.cls_gain == Approx(0.5 * 20 / 80.0));
  CHECK(options.obj_gain == Approx(0.25));
}

TEST_CASE("After AutoAnchor every weight and buffer is rounded to float16's precision, in float32", "[yolov5]") {
  auto model = build_model(parse_model_name("yolov5n"), 3);
  auto& module = *model.module;
  const auto before = state_dict(module);
  std::map<std::string, at::Tensor> kept;
  for (const auto& [name, t] : before) kept[name] = t.clone();
  yolov5::round_to_half(module);
  std::size_t changed = 0;
  for (const auto& [name, t] : state_dict(module)) {
    if (!t.is_floating_point()) continue;
    CHECK(t.scalar_type() == at::kFloat);
    CHECK(t.equal(kept.at(name).to(at::kHalf).to(at::kFloat)));  // the float16 value, exactly
    changed += !t.equal(kept.at(name));
  }
  CHECK(changed > 0);  // random weights are not all float16 values to begin with
}
