// Forward+backward speed of the models on this machine (JSON lines): images/s, the achieved
// GFLOP/s (3 x forward FLOPs per image, the usual forward+backward estimate) and, for scale,
// the GFLOP/s of a large float32 matmul measured in the same run. Median of `repeat` runs.
// Each layout runs twice, with the fused BatchNorm+SiLU (nn/bn_silu.h) and with ATen's two ops,
// interleaved; dtype bfloat16 runs under CPU autocast, as amp=true amp_dtype=bfloat16 trains.
//   bench/model_speed [imgsz=640] [batch=8] [iterations=3] [repeat=3] [dtype=float32|bfloat16] [model=all|yolo9-t|yolox-s]
#include "median.h"
#include "models/model.h"
#include "nn/bn_silu.h"
#include "train/amp.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <fmt/core.h>
#include <nlohmann/json.hpp>
#include <torch/nn/module.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <string>

using namespace libreyolo::models;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

using libreyolo::bench::median;

double matmul_gflops() {
  const auto a = at::randn({2048, 2048});
  const auto b = at::randn({2048, 2048});
  at::matmul(a, b);  // warm-up
  std::vector<double> rates;
  for (int i = 0; i < 5; ++i) {
    const auto start = Clock::now();
    at::matmul(a, b);
    rates.push_back(2.0 * 2048.0 * 2048.0 * 2048.0 / seconds_since(start) / 1e9);
  }
  return median(rates);
}

}  // namespace

int main(int argc, char** argv) {
  const int size = argc > 1 ? std::atoi(argv[1]) : 640;
  const int batch = argc > 2 ? std::atoi(argv[2]) : 8;
  const int iterations = argc > 3 ? std::atoi(argv[3]) : 3;
  const int repeat = argc > 4 ? std::atoi(argv[4]) : 3;
  const bool bfloat16 = argc > 5 && std::string(argv[5]) == "bfloat16";
  const std::string only = argc > 6 ? argv[6] : "all";
  if (only != "all" && only != "yolo9-t" && only != "yolox-s") {
    fmt::print(stderr, "model_speed: model must be all, yolo9-t or yolox-s, not {}\n", only);
    return 2;
  }
  const double peak = matmul_gflops();
  for (const std::string name : {"yolo9-t", "yolox-s"}) {
    if (only != "all" && only != name) continue;
    for (const bool channels_last : {false, true}) {
      Model model = build_model(parse_model_name(name), 80);
      const double forward_gflops = summarize(model, size, size).gflops;
      model.module->train();
      at::Tensor images = at::rand({batch, 3, size, size});
      if (channels_last) {
        to_channels_last(*model.module);
        images = images.contiguous(at::MemoryFormat::ChannelsLast);
      }
      const auto step = [&] {
        for (auto& parameter : model.module->parameters()) parameter.mutable_grad() = at::Tensor();
        at::Tensor loss = at::zeros({});
        {
          libreyolo::train::AutocastGuard autocast(at::kCPU, at::kBFloat16, bfloat16);  // as the trainer's step
          for (const auto& output : model.forward(images)) loss = loss + output.to(at::kFloat).mean();
        }
        loss.backward();
      };
      // the fused BatchNorm+SiLU and ATen's ops, interleaved
      const std::vector<bool> fusions{true, false};
      std::map<bool, std::vector<double>> rates;
      for (const bool fused : fusions) {
        libreyolo::nn::set_fused_bn_silu_enabled(fused);
        step();  // warm-up
      }
      for (int r = 0; r < repeat; ++r) {
        for (const bool fused : fusions) {
          libreyolo::nn::set_fused_bn_silu_enabled(fused);
          const auto start = Clock::now();
          for (int i = 0; i < iterations; ++i) step();
          rates[fused].push_back(batch * iterations / seconds_since(start));
        }
      }
      for (const bool fused : fusions) {
        const double images_per_second = median(rates[fused]);
        fmt::print("{}\n", nlohmann::json{{"bench", "model_forward_backward"}, {"model", name}, {"imgsz", size},
                                          {"batch", batch}, {"channels_last", channels_last},
                                          {"dtype", bfloat16 ? "bfloat16" : "float32"}, {"fused_bn_silu", fused},
                                          {"bn_silu_kernels", libreyolo::nn::bn_silu_capability()},
                                          {"images_per_second", images_per_second}, {"runs", rates[fused]},
                                          {"forward_gflops_per_image", forward_gflops},
                                          {"achieved_gflops_per_second", 3 * forward_gflops * images_per_second},
                                          {"matmul_peak_gflops_per_second", peak},
                                          {"torch_threads", at::get_num_threads()}}
                                   .dump());
      }
      libreyolo::nn::set_fused_bn_silu_enabled(true);
    }
  }
  return 0;
}
