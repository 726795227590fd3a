// YOLOv9's loss on the CPU (one JSON line): the whole loss, TAL assignment included, forward +
// backward, on random head outputs and random boxes of COCO-like sizes. Median of `repeat` timings.
//   bench/yolo9_loss [imgsz=640] [batch=16] [boxes_per_image=40] [classes=80] [repeat=5]
// TRACE=file.json also writes one more forward + backward as a Chrome trace of its operators.
// It also times the TAL assigner alone in both forms, on the same decoded boxes: the dense one
// (every (box, anchor) pair as [B, G, A] tensors: what a GPU runs; its cost grows with
// boxes_per_image G, and with the allocator: glibc's malloc against tcmalloc, -Dtcmalloc) and the
// CPU's (candidate cells only: what the loss runs here).
#include "median.h"
#include "models/anchors.h"
#include "models/decode.h"
#include "models/yolo9/loss.h"
#include "random_targets.h"
#include "models/yolo9/decode.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <fmt/core.h>
#include <nlohmann/json.hpp>
#include <torch/csrc/autograd/profiler_legacy.h>

#include <chrono>
#include <cstdlib>
#include <vector>

using namespace libreyolo;
using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) {
  const auto arg = [&](int i, int fallback) { return argc > i ? std::atoi(argv[i]) : fallback; };
  const int imgsz = arg(1, 640), batch = arg(2, 16), per_image = arg(3, 40), classes = arg(4, 80), repeat = arg(5, 5);
  at::manual_seed(0);
  const int reg_max = 16;
  std::vector<at::Tensor> maps;
  for (int stride : {8, 16, 32}) {
    maps.push_back(at::randn({batch, 4 * reg_max + classes, imgsz / stride, imgsz / stride})
                       .contiguous(at::MemoryFormat::ChannelsLast)  // as the head's maps on the CPU
                       .requires_grad_(true));
  }
  const models::TargetBatch padded = bench::random_targets(batch, per_image, classes, imgsz);
  models::yolo9::LossOptions options;

  std::vector<double> loss_ms;
  double foreground = 0;
  for (int r = 0; r < repeat + 1; ++r) {
    const auto start = Clock::now();
    models::LossTerms terms = models::yolo9::loss(maps, padded, options);
    terms.total.backward();
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    foreground = terms.part("num_fg").item<double>();
    for (auto& m : maps) m.mutable_grad().reset();
    if (r > 0) loss_ms.push_back(ms);  // the first is warm-up
  }
  // The assigner alone, on the boxes and class scores the maps decode to.
  std::vector<at::Tensor> detached;
  for (const at::Tensor& map : maps) detached.push_back(map.detach());
  const models::Decoded decoded_maps = models::decode_yolo9(detached, reg_max, {8, 16, 32});
  const models::AnchorPoints points = models::anchor_points(maps, {8, 16, 32});
  const at::Tensor decoded = decoded_maps.boxes.contiguous(), class_logits = at::logit(decoded_maps.class_scores).contiguous();
  const auto time_assigner = [&](bool dense) {
    std::vector<double> ms;
    for (int r = 0; r < repeat + 1; ++r) {
      const auto start = Clock::now();
      const auto assigned = dense ? models::yolo9::tal_assign_dense(class_logits, decoded, points.centres, points.strides, padded, options.tal)
                                  : *models::yolo9::tal_assign_sparse(class_logits, decoded, points.centres, points.strides, padded, options.tal);
      if (r > 0) ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    }
    return bench::median(ms);
  };
  const double dense_ms = time_assigner(true), sparse_ms = time_assigner(false);

  if (std::getenv("TRACE")) {
    torch::autograd::profiler::RecordProfile guard(std::getenv("TRACE"));
    models::LossTerms terms = models::yolo9::loss(maps, padded, options);
    terms.total.backward();
  }
  nlohmann::json out{{"bench", "yolo9_loss"}, {"imgsz", imgsz}, {"batch", batch}, {"boxes_per_image", per_image},
                     {"classes", classes}, {"threads", at::get_num_threads()}, {"loss_fwd_bwd_ms", bench::median(loss_ms)},
                     {"foreground_per_image", foreground}, {"tal_dense_ms", dense_ms}, {"tal_cpu_ms", sparse_ms}};
  fmt::print("{}\n", out.dump());
}
