// YOLOX's SimOTA assignment on the CPU (one JSON line): the dense form (every (box, anchor) pair,
// what a GPU runs) against the CPU's per-image form (each image's candidate anchors only), on the
// same random predictions and boxes of COCO-like sizes. Medians of `repeat` timings, interleaved.
//   bench/simota_assign [imgsz=640] [batch=16] [boxes_per_image=30] [classes=80] [repeat=5] [original=0]
#include "median.h"
#include "models/anchors.h"
#include "models/yolox/loss.h"
#include "random_targets.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdlib>
#include <vector>

using namespace libreyolo;
using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) {
  const auto arg = [&](int i, int fallback) { return argc > i ? std::atoi(argv[i]) : fallback; };
  const int imgsz = arg(1, 640), batch = arg(2, 16), per_image = arg(3, 30), classes = arg(4, 80), repeat = arg(5, 5);
  const auto variant = arg(6, 0) != 0 ? models::yolo_common::SimOtaVariant::Original : models::yolo_common::SimOtaVariant::Current;
  at::manual_seed(0);
  std::vector<at::Tensor> maps;
  for (int stride : {8, 16, 32}) maps.push_back(at::zeros({1, 1, imgsz / stride, imgsz / stride}));
  const models::AnchorPoints points = models::anchor_points(maps, {8, 16, 32});
  const std::int64_t anchors = points.centres.size(0);
  const models::TargetBatch targets = bench::random_targets(batch, per_image, classes, imgsz);
  // Predictions: (cx, cy, w, h) near each anchor, a few strides across.
  const at::Tensor stride = points.strides.view({1, -1, 1});
  const at::Tensor predicted = at::cat({points.centres.unsqueeze(0) + at::randn({batch, anchors, 2}) * stride,
                                        (at::rand({batch, anchors, 2}) * 6 + 0.5) * stride}, 2);
  const at::Tensor logits = at::randn({batch, anchors, classes}) * 2, objectness = at::randn({batch, anchors});

  std::vector<double> dense_ms, per_image_ms;
  double foreground = 0;
  for (int r = 0; r < repeat + 1; ++r) {  // the first of each is warm-up
    for (const bool dense : {true, false}) {
      const auto start = Clock::now();
      const auto assigned = models::yolo_common::simota_assign(logits, objectness, predicted, points.cells, points.strides,
                                                         targets, variant, dense);
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
      foreground = assigned.foreground.sum().item<double>() / batch;
      if (r > 0) (dense ? dense_ms : per_image_ms).push_back(ms);
    }
  }
  nlohmann::json out{{"bench", "simota_assign"}, {"imgsz", imgsz}, {"batch", batch}, {"boxes_per_image", per_image},
                     {"classes", classes}, {"variant", variant == models::yolo_common::SimOtaVariant::Original ? "original" : "current"},
                     {"threads", at::get_num_threads()}, {"foreground_per_image", foreground},
                     {"dense_ms", bench::median(dense_ms)}, {"cpu_per_image_ms", bench::median(per_image_ms)}};
  fmt::print("{}\n", out.dump());
}
