#include "models/model_name.h"
#include "models/model.h"
#include "models/safetensors.h"
#include "models/yolo5/autoanchor.h"
#include "models/yolo5/loss.h"
#include "models/yolo5/model.h"

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
  const auto fit = yolo5::anchor_fit(sizes, anchors, 4.0);
  CHECK(fit.best_possible_recall == Approx(0.75));
  // anchors past the threshold per box: 1 (the first), 1, 0, 1 (the second only: 150/13 > 4)
  CHECK(fit.anchors_per_target == Approx(0.75));
  CHECK(yolo5::anchor_fit(sizes, anchors, 11.0).best_possible_recall == Approx(1.0));
}

TEST_CASE("AutoAnchor evolves anchors that fit labels the default anchors miss", "[yolov5]") {
  // wide and tall boxes no default anchor reaches within 4x on both sides
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(7);
  const at::Tensor wide = at::stack({at::rand({150}, generator) * 60 + 270, at::rand({150}, generator) * 4 + 8}, 1);
  const at::Tensor tall = at::stack({at::rand({150}, generator) * 4 + 8, at::rand({150}, generator) * 60 + 270}, 1);
  const at::Tensor sizes = at::cat({wide, tall});
  at::Tensor defaults = at::empty({9, 2});
  for (int level = 0; level < 3; ++level) {
    for (int k = 0; k < 6; ++k) defaults[level * 3 + k / 2][k % 2] = yolo5::kDefaultAnchors[level][k];
  }
  const double before = yolo5::anchor_fit(sizes, defaults, 4.0).best_possible_recall;
  CHECK(before < 0.5);
  const at::Tensor evolved = yolo5::evolve_anchors(sizes, 9, 640, 4.0, 300, 1);
  REQUIRE(evolved.sizes() == c10::IntArrayRef{9, 2});
  CHECK(yolo5::anchor_fit(sizes, evolved, 4.0).best_possible_recall == Approx(1.0));
  CHECK(evolved.prod(1).diff().ge(0).all().item<bool>());  // smallest area first
  CHECK(evolved.ge(2.0).all().item<bool>());
  CHECK(at::equal(evolved, yolo5::evolve_anchors(sizes, 9, 640, 4.0, 300, 1)));  // the seed decides
}

TEST_CASE("YOLOv5's gains scale with levels, classes and image size as its train.py's", "[yolov5]") {
  const auto options = yolo5::scaled_gains(0.05, 1.0, 0.5, 20, 320);
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
  yolo5::round_to_half(module);
  std::size_t changed = 0;
  for (const auto& [name, t] : state_dict(module)) {
    if (!t.is_floating_point()) continue;
    CHECK(t.scalar_type() == at::kFloat);
    CHECK(t.equal(kept.at(name).to(at::kHalf).to(at::kFloat)));  // the float16 value, exactly
    changed += !t.equal(kept.at(name));
  }
  CHECK(changed > 0);  // random weights are not all float16 values to begin with
}

namespace {

// Raw maps of a 64x64 batch (P3-P5: 8x8, 4x4, 2x2) for 3 classes, then yolov5's default anchors in grid units.
std::vector<at::Tensor> yolov5_maps(std::int64_t batch) {
  std::vector<at::Tensor> maps;
  for (std::int64_t side : {8, 4, 2}) maps.push_back(at::randn({batch, 3 * 8, side, side}, at::kDouble).to(at::kFloat));
  const at::Tensor anchors = at::tensor({10.f, 13.f, 16.f, 30.f, 33.f, 23.f, 30.f, 61.f, 62.f, 45.f, 59.f, 119.f,
                                         116.f, 90.f, 156.f, 198.f, 373.f, 326.f}).view({3, 3, 2}) /
                             at::tensor({8.f, 16.f, 32.f}).view({3, 1, 1});
  maps.push_back(anchors);
  return maps;
}

// Rows (image, class, cx, cy, w, h) of `rows` for images [first, first + count), re-indexed from 0.
at::Tensor rows_of(const at::Tensor& rows, std::int64_t first, std::int64_t count) {
  const at::Tensor image = rows.select(1, 0);
  at::Tensor kept = rows.index({image.ge(first).logical_and(image.lt(first + count))}).clone();
  kept.select(1, 0).sub_(static_cast<double>(first));
  return kept;
}

}  // namespace

TEST_CASE("YOLOv5's loss on two ranks with unequal match counts averages to one process's over the global batch",
          "[yolov5]") {
  using namespace libreyolo::models::yolo5;
  at::manual_seed(3);
  const std::vector<at::Tensor> full = yolov5_maps(4);
  // rank 0 holds images 0-1 (8 boxes, two of them on one cell), rank 1 images 2-3 (2 boxes): the
  // per-rank means of yolov5's own DDP weigh a box of rank 1 four times one of rank 0
  const at::Tensor rows = at::tensor({0.f, 0.f, 0.3f, 0.3f, 0.2f, 0.3f,   0.f, 1.f, 0.3f, 0.3f, 0.2f, 0.3f,
                                      0.f, 2.f, 0.7f, 0.6f, 0.5f, 0.4f,   0.f, 0.f, 0.1f, 0.8f, 0.1f, 0.1f,
                                      1.f, 1.f, 0.5f, 0.5f, 0.9f, 0.8f,   1.f, 2.f, 0.2f, 0.7f, 0.3f, 0.2f,
                                      1.f, 0.f, 0.6f, 0.2f, 0.15f, 0.2f,  1.f, 1.f, 0.8f, 0.8f, 0.3f, 0.3f,
                                      2.f, 2.f, 0.4f, 0.5f, 0.6f, 0.5f,   3.f, 0.f, 0.5f, 0.4f, 0.2f, 0.2f}).view({-1, 6});
  LossOptions options = scaled_gains(0.05, 1.0, 0.5, 3, 64);
  const auto leaves = [](const std::vector<at::Tensor>& maps, std::int64_t first, std::int64_t count) {
    std::vector<at::Tensor> out;
    for (std::size_t i = 0; i + 1 < maps.size(); ++i) out.push_back(maps[i].narrow(0, first, count).clone().requires_grad_(true));
    out.push_back(maps.back());
    return out;
  };
  std::vector<at::Tensor> one = leaves(full, 0, 4);
  const LossTerms single = loss(one, pad_targets(rows, 4, 64, 64), options);
  single.total.backward();

  // the ranks' match counts per level, then each rank's loss with the global count as c10d's sum gives it
  std::vector<at::Tensor> counts;
  LossOptions recording = options;
  recording.world_size = 2;
  recording.global_normaliser = [&counts](const at::Tensor& local) {
    counts.push_back(local.clone());
    return local.clamp_min(1.0);
  };
  for (std::int64_t rank = 0; rank < 2; ++rank) (void)loss(leaves(full, 2 * rank, 2), pad_targets(rows_of(rows, 2 * rank, 2), 2, 64, 64), recording);
  REQUIRE(counts.size() == 2);
  REQUIRE_FALSE(at::equal(counts[0], counts[1]));  // the case this is about
  LossOptions ranked = options;
  ranked.world_size = 2;
  ranked.global_normaliser = [&counts](const at::Tensor&) { return (counts[0] + counts[1]).clamp_min(1.0) / 2; };
  std::vector<std::vector<at::Tensor>> rank_maps;
  std::vector<double> parts(3, 0.0);
  for (std::int64_t rank = 0; rank < 2; ++rank) {
    rank_maps.push_back(leaves(full, 2 * rank, 2));
    const LossTerms terms = loss(rank_maps.back(), pad_targets(rows_of(rows, 2 * rank, 2), 2, 64, 64), ranked);
    terms.total.backward();
    for (std::size_t k = 0; k < 3; ++k) parts[k] += terms.parts[k].second.item<double>() / 2;  // as the ranks' mean is logged
  }
  for (std::size_t k = 0; k < 3; ++k) {
    INFO(single.parts[k].first);
    CHECK(parts[k] == Approx(single.parts[k].second.item<double>()).epsilon(1e-5));
  }
  // data-parallel gradients are the ranks' mean: each rank's share of the maps gets half its rank's gradient
  for (std::size_t level = 0; level < 3; ++level) {
    for (std::int64_t rank = 0; rank < 2; ++rank) {
      INFO("level " << level << ", rank " << rank);
      const at::Tensor expected = one[level].grad().narrow(0, 2 * rank, 2);
      const at::Tensor got = rank_maps[static_cast<std::size_t>(rank)][level].grad() / 2;
      CHECK((got - expected).abs().max().item<double>() <= 1e-6 * std::max(1.0, expected.abs().max().item<double>()));
    }
  }
}
