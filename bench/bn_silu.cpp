// The tail of every Conv+BN+SiLU block in training: BatchNorm2d (batch statistics) then SiLU,
// forward and backward, fused (nn/bn_silu.h) against ATen's two ops, on channels-last (YOLOv9) or
// NCHW (YOLOX on the CPU) activations of the sizes YOLOv9-t has at batch 8 and imgsz 320 (and one
// at 640). JSON lines; median of `repeat` timings of `iterations` forward+backward passes each.
//   OMP_NUM_THREADS=2 bench/bn_silu [dtype=bfloat16|float32] [layout=channels_last|nchw] [iterations=20] [repeat=5]
#include "median.h"
#include "nn/bn_silu.h"

#include <ATen/Version.h>
#include <fmt/core.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <string>

using namespace libreyolo;
using Clock = std::chrono::steady_clock;

namespace {

using bench::median;

struct Times {
  double forward_ms = 0, backward_ms = 0;
};

Times time_ms(torch::nn::BatchNorm2d& bn, const torch::Tensor& input, const torch::Tensor& dz, bool fused, int iterations) {
  Times t;
  for (int i = 0; i < iterations; ++i) {
    torch::Tensor x = input.detach().requires_grad_(true);
    const auto start = Clock::now();
    torch::Tensor z = fused ? nn::batch_norm_silu(x, *bn) : torch::silu(bn(x));
    const auto middle = Clock::now();
    z.backward(dz);
    t.forward_ms += std::chrono::duration<double, std::milli>(middle - start).count() / iterations;
    t.backward_ms += std::chrono::duration<double, std::milli>(Clock::now() - middle).count() / iterations;
  }
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> args{{"dtype", "bfloat16"}, {"layout", "channels_last"}, {"iterations", "20"}, {"repeat", "5"}};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto eq = arg.find('=');
    if (eq == std::string::npos || !args.count(arg.substr(0, eq))) {
      fmt::print(stderr, "usage: bn_silu [dtype=bfloat16|float32] [layout=channels_last|nchw] [iterations=20] [repeat=5]\n");
      return 2;
    }
    args[arg.substr(0, eq)] = arg.substr(eq + 1);
  }
  const auto dtype = args["dtype"] == "float32" ? torch::kFloat : torch::kBFloat16;
  if (args["layout"] != "channels_last" && args["layout"] != "nchw") {
    fmt::print(stderr, "bn_silu: layout must be channels_last or nchw, not {}\n", args["layout"]);
    return 2;
  }
  const auto format = args["layout"] == "nchw" ? at::MemoryFormat::Contiguous : at::MemoryFormat::ChannelsLast;
  const int iterations = std::stoi(args["iterations"]);
  const int repeat = std::stoi(args["repeat"]);
  for (const auto& sizes : std::vector<std::vector<std::int64_t>>{
           {8, 32, 160, 160}, {8, 64, 80, 80}, {8, 64, 40, 40}, {8, 128, 20, 20}, {8, 128, 10, 10}, {8, 64, 160, 160}}) {
    torch::manual_seed(0);
    const torch::Tensor x = torch::randn(sizes).to(dtype).contiguous(format);
    const torch::Tensor dz = torch::randn(sizes).to(dtype).contiguous(format);
    torch::nn::BatchNorm2d bn(torch::nn::BatchNorm2dOptions(sizes[1]).eps(1e-3).momentum(0.03));
    std::vector<double> fused_fwd, fused_bwd, aten_fwd, aten_bwd;
    time_ms(bn, x, dz, true, 2);
    time_ms(bn, x, dz, false, 2);
    for (int r = 0; r < repeat; ++r) {  // interleaved
      const Times f = time_ms(bn, x, dz, true, iterations);
      const Times a = time_ms(bn, x, dz, false, iterations);
      fused_fwd.push_back(f.forward_ms);
      fused_bwd.push_back(f.backward_ms);
      aten_fwd.push_back(a.forward_ms);
      aten_bwd.push_back(a.backward_ms);
    }
    const double fused = median(fused_fwd) + median(fused_bwd), aten = median(aten_fwd) + median(aten_bwd);
    nlohmann::json row{{"shape", sizes},
                       {"dtype", args["dtype"]},
                       {"layout", args["layout"]},
                       {"threads", at::get_num_threads()},
                       {"kernels", nn::bn_silu_capability()},
                       {"fused_forward_ms", median(fused_fwd)},
                       {"fused_backward_ms", median(fused_bwd)},
                       {"aten_forward_ms", median(aten_fwd)},
                       {"aten_backward_ms", median(aten_bwd)},
                       {"speedup", aten / fused}};
    fmt::print("{}\n", row.dump());
  }
  return 0;
}
