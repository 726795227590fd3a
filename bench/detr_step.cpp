// One RT-DETR or D-FINE training step on this machine, by phase (JSON line): the forward with the denoising
// queries, the Hungarian matching and the loss, the backward, and AdamW with gradient clipping
// (the reference's recipe: lr 1e-4 for RT-DETR, 2e-4 for D-FINE, weight decay 1e-4, clip 0.1). Random images and targets, the
// same each step; medians over `steps` after one warm-up step. bench/detr_step.py runs this beside
// libreyolo 1.6.0's step.
//   bench/detr_step [size=r18|...|x|dfine-n|...|dfine-x|deim-n|...|deim-x] [imgsz=320] [batch=4] [steps=5] [targets=6] [classes=80] [channels_last=0]
#include "median.h"
#include "models/detr_common/criterion.h"
#include "models/detr_common/denoising.h"
#include "models/detr_common/dfine_criterion.h"
#include "models/detr_common/dfine_model.h"
#include "models/rtdetr/model.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <fmt/core.h>
#include <nlohmann/json.hpp>
#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/adamw.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>

using namespace libreyolo::models;
using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> args{{"size", "r18"}, {"imgsz", "320"}, {"batch", "4"}, {"steps", "5"}, {"targets", "6"},
                                          {"classes", "80"}, {"channels_last", "0"}};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto eq = arg.find('=');
    if (eq == std::string::npos || !args.count(arg.substr(0, eq))) {
      fmt::print(stderr, "usage: detr_step [size=r18] [imgsz=320] [batch=4] [steps=5] [targets=6] [classes=80] [channels_last=0]\n");
      return 2;
    }
    args[arg.substr(0, eq)] = arg.substr(eq + 1);
  }
  const int imgsz = std::stoi(args["imgsz"]), batch = std::stoi(args["batch"]), steps = std::stoi(args["steps"]);
  const int per_image = std::stoi(args["targets"]), classes = std::stoi(args["classes"]);
  at::manual_seed(0);
  // the family: RT-DETR (size r18 ... x) or D-FINE (size=dfine-n ... dfine-x)
  const bool deim = args["size"].starts_with("deim-");
  const bool dfine = deim || args["size"].starts_with("dfine-");
  const std::string size = deim ? args["size"].substr(5) : dfine ? args["size"].substr(6) : args["size"];
  std::shared_ptr<torch::nn::Module> module;
  std::function<std::pair<at::Tensor, double>(const at::Tensor&, const detr::DetrTargets&, const detr::DenoisingQueries&)> step_loss;
  if (dfine) {
    detr::DfineModel model(detr::DfineOptions{.size = size, .classes = classes,
                                              .variant = deim ? detr::DfineVariant::deim : detr::DfineVariant::dfine});
    module = model.ptr();
    step_loss = [model, classes, deim](const at::Tensor& images, const detr::DetrTargets& targets, const detr::DenoisingQueries& queries) mutable {
      auto start = Clock::now();
      const auto outputs = model->forward(images, &queries);
      const double forward = since(start);
      detr::DfineCriterionOptions criterion;
      criterion.classes = classes;
      criterion.mal = deim;
      return std::pair{detr::dfine_loss(outputs, targets, outputs.up, outputs.reg_scale, criterion).total, forward};
    };
  } else {
    detr::RtdetrModel model(detr::RtdetrOptions{.size = size, .classes = classes});
    module = model.ptr();
    step_loss = [model, classes](const at::Tensor& images, const detr::DetrTargets& targets, const detr::DenoisingQueries& queries) mutable {
      auto start = Clock::now();
      const auto outputs = model->forward(images, &queries);
      const double forward = since(start);
      detr::CriterionOptions criterion;
      criterion.classes = classes;
      return std::pair{detr::detr_loss(outputs, targets, criterion).total, forward};
    };
  }
  module->train();
  // the recipe: RT-DETR's and DEIM's AdamW 1e-4, D-FINE's 2e-4; weight decay 1e-4 and clip 0.1 for all
  torch::optim::AdamW optimizer(module->parameters(), torch::optim::AdamWOptions(dfine && !deim ? 2e-4 : 1e-4).weight_decay(1e-4));
  const bool channels_last = args["channels_last"] == "1";  // 4-D weights and the images in NHWC
  if (channels_last) {
    for (auto& parameter : module->parameters()) {
      if (parameter.dim() == 4) parameter.set_data(parameter.contiguous(at::MemoryFormat::ChannelsLast));
    }
  }
  const at::Tensor images = channels_last ? at::rand({batch, 3, imgsz, imgsz}).contiguous(at::MemoryFormat::ChannelsLast)
                                          : at::rand({batch, 3, imgsz, imgsz});
  const at::Tensor sizes = 0.05 + 0.3 * at::rand({batch * per_image, 2});
  const detr::DetrTargets targets{at::randint(classes, {batch * per_image}, at::kLong),
                                  at::cat({sizes / 2 + (1 - sizes) * at::rand({batch * per_image, 2}), sizes}, 1),
                                  std::vector<std::int64_t>(static_cast<std::size_t>(batch), per_image)};
  detr::DenoisingOptions denoising;
  denoising.classes = classes;
  denoising.mirror_negative = dfine;
  auto generator = at::make_generator<at::CPUGeneratorImpl>(0);
  std::map<std::string, std::vector<double>> phases;
  for (int step = 0; step <= steps; ++step) {
    auto start = Clock::now();
    const auto [count, groups] = detr::denoising_shape(targets.counts, denoising);
    const auto queries = detr::make_denoising_queries(targets, denoising, detr::draw_denoising_noise(batch, count, classes, generator));
    const double denoising_time = since(start);
    start = Clock::now();
    const auto [loss, forward_only] = step_loss(images, targets, queries);
    const double forward = denoising_time + forward_only;
    const double matching_loss = since(start) - forward_only;
    start = Clock::now();
    optimizer.zero_grad();
    loss.backward();
    const double backward = since(start);
    start = Clock::now();
    torch::nn::utils::clip_grad_norm_(module->parameters(), 0.1);
    optimizer.step();
    const double optimizer_step = since(start);
    if (step == 0) continue;  // warm-up
    phases["forward_s"].push_back(forward);
    phases["matching_loss_s"].push_back(matching_loss);
    phases["backward_s"].push_back(backward);
    phases["optimizer_s"].push_back(optimizer_step);
    phases["step_s"].push_back(forward + matching_loss + backward + optimizer_step);
  }
  nlohmann::json out = {{"bench", "detr_step"}, {"implementation", "libreyolo (C++)"}, {"model", dfine ? args["size"] : "rtdetr-" + args["size"]},
                        {"imgsz", imgsz}, {"batch", batch}, {"targets_per_image", per_image}, {"steps", steps},
                        {"threads", at::get_num_threads()}, {"channels_last", channels_last}};
  for (const auto& [name, values] : phases) out[name] = libreyolo::bench::median(values);
  fmt::print("{}\n", out.dump());
  return 0;
}
