// One mixed-precision training step on the GPU for each family: float16 with the loss scaler
// and bfloat16 without; the loss is finite and the scaler either steps (weights move, scale
// kept) or skips an overflowing step (weights kept, scale halved). Exits 77 (skipped) without a CUDA device.
#include "models/model.h"
#include "models/targets.h"
#include "models/yolo9/loss.h"
#include "models/yolox/loss.h"
#include "train/amp.h"
#include "train/optimizer.h"

#include <ATen/ATen.h>
#include <fmt/core.h>
#include <torch/cuda.h>

#include <cmath>
#include <limits>

using namespace libreyolo;

int main() {
  if (!torch::cuda::is_available()) {
    fmt::print("skipped: no CUDA device\n");
    return 77;
  }
  const c10::Device device(c10::kCUDA, 0);
  bool ok = true;
  for (const std::string family : {"yolo9", "yolox"}) {
    for (const auto dtype : {c10::kHalf, c10::kBFloat16}) {
      auto model = models::build_model({family, family == "yolo9" ? "t" : "n"}, 4);
      model.module->to(device);
      model.module->train();
      auto optimizer = train::make_optimizer(train::parameter_groups(*model.module), {});
      train::GradScaler scaler(dtype == c10::kHalf);
      const at::Tensor before = model.module->parameters()[0].detach().clone();
      const at::Tensor images = at::rand({2, 3, 128, 128}, at::TensorOptions().device(device));
      const auto targets = models::pad_targets(at::tensor(std::vector<float>{0, 1, 0.5, 0.5, 0.3, 0.4, 1, 2, 0.4, 0.6, 0.2, 0.2}).view({2, 6}),
                                               2, 128, 128).to(device);
      at::Tensor loss;
      {
        train::AutocastGuard guard(c10::kCUDA, dtype, true);
        const auto maps = model.forward(images);
        loss = family == "yolo9" ? models::yolo9::loss(maps, targets, {}).total : models::yolox::loss(maps, targets, {}).total;
      }
      optimizer->zero_grad();
      scaler.scale(loss).backward();
      const bool stepped = scaler.step(*optimizer).item<bool>();
      scaler.update();
      const double value = loss.item<double>();
      const bool moved = !at::equal(before, model.module->parameters()[0].detach());
      // float16: a clean step keeps the scale and moves the weights; an overflowing one (possible
      // at 65536 on a fresh model) is skipped and halves the scale. bfloat16 always steps.
      const bool good = std::isfinite(value) &&
                        (dtype == c10::kBFloat16 ? stepped && moved
                                                 : (stepped ? moved && scaler.current_scale() == 65536.0
                                                            : !moved && scaler.current_scale() == 32768.0));
      fmt::print("{} {}: loss {:.4f}, stepped {}, weights moved {}, scale {} {}\n", family, c10::toString(dtype), value,
                 stepped, moved, scaler.current_scale(), good ? "ok" : "FAILED");
      ok = ok && good;
    }
  }
  // The loss scaler on the device with the capturable optimizer: an injected Inf skips the step
  // (weights, momentum kept) and halves the scale, clean steps grow it after growth_interval, all
  // decided on the GPU (the flags are read here only to check them).
  {
    at::Tensor w = at::ones({4}, at::TensorOptions().device(device)).requires_grad_(true);
    train::ParameterGroups groups;
    groups.weights = {w};
    auto optimizer = train::make_optimizer(groups, {.name = "sgd", .lr0 = 0.1, .momentum = 0.9, .nesterov = true, .weight_decay = 0});
    train::GradScaler scaler(true, /*init_scale=*/1024.0, /*growth=*/2.0, /*backoff=*/0.5, /*interval=*/2);
    const auto step = [&](float bad) {
      optimizer->zero_grad(/*set_to_none=*/false);
      scaler.scale((w * w).sum()).backward();  // gradient 2·1024·w
      if (bad != 0) w.mutable_grad()[1] = bad;
      const bool stepped = scaler.step(*optimizer).item<bool>();
      scaler.update();
      return stepped;
    };
    const bool clean1 = step(0);
    const at::Tensor after_clean = w.detach().clone();
    const bool skipped = !step(std::numeric_limits<float>::infinity());
    const bool kept = at::equal(w.detach(), after_clean);
    const double backed_off = scaler.current_scale();
    const bool clean2 = step(0), clean3 = step(0);
    const double grown = scaler.current_scale();
    const bool good = clean1 && skipped && kept && backed_off == 512.0 && clean2 && clean3 && grown == 1024.0;
    fmt::print("scaler on the device: clean step {}, inf step skipped {}, weights kept {}, scale after backoff {}, after 2 clean "
               "steps {} {}\n", clean1, skipped, kept, backed_off, grown, good ? "ok" : "FAILED");
    ok = ok && good;
  }
  return ok ? 0 : 1;
}
