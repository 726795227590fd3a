// One optimizer step over a real model's parameter groups (JSON lines): torch::optim's SGD/AdamW
// (a loop of per-parameter ops) against our capturable ForeachSGD/ForeachAdamW (foreach kernels,
// hyperparameters in device tensors, what the CUDA-graph optimizer step captures). On the CPU,
// foreach is a per-tensor loop too, so this shows what the capturable form costs there; on a GPU
// it shows the launches it saves. Median of `repeat` timings of `iterations` steps each.
//   bench/optimizer_step [model=yolo9-t] [device=cpu] [iterations=20] [repeat=5]
#include "median.h"
#include "models/model.h"
#include "train/optimizer.h"

#include <ATen/ATen.h>
#include <fmt/core.h>
#include <nlohmann/json.hpp>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <stdexcept>
#include <string>

using namespace libreyolo;
using Clock = std::chrono::steady_clock;

namespace {

using bench::median;

// Groups as make_optimizer forms them, for torch::optim's own class.
template <typename Optimizer, typename Options>
std::unique_ptr<torch::optim::Optimizer> reference(const train::ParameterGroups& g, const Options& base, double decay) {
  std::vector<torch::optim::OptimizerParamGroup> groups;
  for (const auto& [params, d] : {std::pair{g.bn, 0.0}, std::pair{g.weights, decay}, std::pair{g.biases, 0.0}}) {
    auto options = std::make_unique<Options>(base);
    options->weight_decay(d);
    groups.emplace_back(params, std::move(options));
  }
  return std::make_unique<Optimizer>(groups, base);
}

void synchronize(const c10::Device& device) {
  if (device.is_cuda()) at::zeros({1}, at::TensorOptions().device(device)).cpu();
}

}  // namespace

int run(int argc, char** argv) {
  std::map<std::string, std::string> args{{"model", "yolo9-t"}, {"device", "cpu"}, {"iterations", "20"}, {"repeat", "5"}};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto eq = a.find('=');
    if (eq != std::string::npos) args[a.substr(0, eq)] = a.substr(eq + 1);
  }
  const c10::Device device(args["device"] == "cpu" ? std::string("cpu") : "cuda:" + args["device"]);
  const int iterations = std::stoi(args["iterations"]), repeat = std::stoi(args["repeat"]);
  const std::string name = args["model"];
  const auto dash = name.find('-');
  if (dash == std::string::npos) throw std::invalid_argument("model=" + name + ": give a family and size, such as yolo9-t");
  auto model = models::build_model({name.substr(0, dash), name.substr(dash + 1)}, 80);
  model.module->to(device);
  const auto groups = train::parameter_groups(*model.module);
  for (auto& p : model.module->parameters()) p.mutable_grad() = at::randn_like(p) * 1e-3;
  std::size_t tensors = groups.bn.size() + groups.weights.size() + groups.biases.size();

  for (const std::string kind : {"sgd", "adamw"}) {
    const train::OptimizerOptions options{.name = kind, .lr0 = 1e-3, .momentum = 0.937, .nesterov = true, .weight_decay = 5e-4};
    std::unique_ptr<torch::optim::Optimizer> ours = train::make_optimizer(groups, options);
    std::unique_ptr<torch::optim::Optimizer> theirs =
        kind == "sgd" ? reference<torch::optim::SGD>(groups, torch::optim::SGDOptions(1e-3).momentum(0.937).nesterov(true), 5e-4)
                      : reference<torch::optim::AdamW>(groups, torch::optim::AdamWOptions(1e-3), 5e-4);
    nlohmann::ordered_json row{{"model", name}, {"device", device.str()}, {"optimizer", kind}, {"tensors", tensors},
                               {"iterations", iterations}, {"repeat", repeat}};
    for (const auto& [label, optimizer] : {std::pair{"torch_optim", theirs.get()}, std::pair{"capturable", ours.get()}}) {
      optimizer->step();  // state allocated outside the timing
      synchronize(device);
      std::vector<double> ms;
      for (int r = 0; r < repeat; ++r) {
        const auto start = Clock::now();
        for (int i = 0; i < iterations; ++i) optimizer->step();
        synchronize(device);
        ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count() / iterations);
      }
      row[std::string(label) + "_ms_per_step"] = median(ms);
    }
    row["capturable_over_torch_optim"] = row["capturable_ms_per_step"].get<double>() / row["torch_optim_ms_per_step"].get<double>();
    fmt::print("{}\n", row.dump());
  }
  return 0;
}

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& error) {
    fmt::print(stderr, "optimizer_step: {}\n", error.what());
    return 2;
  }
}
