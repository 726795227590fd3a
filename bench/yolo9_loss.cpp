// YOLOv9's loss on the CPU (one JSON line): the whole loss, TAL assignment included, forward +
// backward, on random head outputs and random boxes of COCO-like sizes. Median of `repeat` timings.
//   bench/yolo9_loss [imgsz=640] [batch=16] [boxes_per_image=40] [classes=80] [repeat=5]
// TRACE=file.json also writes one more forward + backward as a Chrome trace of its operators.
// The [B, G, A] assignment tensors grow with boxes_per_image (G): it shows what the allocator costs
// (glibc's malloc against tcmalloc: -Dtcmalloc) and what the assigner costs per box.
#include "median.h"
#include "models/targets.h"
#include "models/yolo9/loss.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <fmt/core.h>
#include <nlohmann/json.hpp>
#include <torch/csrc/autograd/profiler_legacy.h>

#include <chrono>
#include <cmath>
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
  // Boxes: centre uniform, sides log-uniform from 4 to imgsz/2 pixels (normalised xywh rows).
  const std::int64_t rows = static_cast<std::int64_t>(batch) * per_image;
  const at::Tensor image = at::arange(batch, at::kFloat).repeat_interleave(per_image);
  const at::Tensor cls = at::randint(classes, {rows}).to(at::kFloat);
  const at::Tensor centre = at::rand({rows, 2}) * 0.8 + 0.1;
  const at::Tensor sides = at::exp(at::rand({rows, 2}) * std::log(imgsz / 8.0)) * 4.0 / imgsz;
  const at::Tensor targets = at::cat({image.unsqueeze(1), cls.unsqueeze(1), centre, sides}, 1);
  const models::TargetBatch padded = models::pad_targets(targets, batch, imgsz, imgsz);
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
  if (std::getenv("TRACE")) {
    torch::autograd::profiler::RecordProfile guard(std::getenv("TRACE"));
    models::LossTerms terms = models::yolo9::loss(maps, padded, options);
    terms.total.backward();
  }
  nlohmann::json out{{"bench", "yolo9_loss"}, {"imgsz", imgsz}, {"batch", batch}, {"boxes_per_image", per_image},
                     {"classes", classes}, {"threads", at::get_num_threads()}, {"loss_fwd_bwd_ms", bench::median(loss_ms)},
                     {"foreground_per_image", foreground}};
  fmt::print("{}\n", out.dump());
}
