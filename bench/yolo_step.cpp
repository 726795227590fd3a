// One training step of a convolutional family on this machine, by phase (JSON line): the forward,
// the loss (the family's own: YOLOv5's anchor matching, YOLOv7's SimOTA, RTMDet's soft-label
// assigner), the backward, and the optimizer on the trainer's own groups and clipping: SGD (lr
// 0.01, momentum 0.937 with Nesterov, weight decay 5e-4 on the weights; yolov5 clips at 10) or
// AdamW (RTMDet's: lr 0.004, weight decay 0.05, no clipping). Random images and targets (normalised rows, as the loader collates
// them), the same each step; medians over `steps` after one warm-up step. bench/yolo_step.py runs
// this beside the reference's step.
//   bench/yolo_step [model=yolov5n] [imgsz=320] [batch=8] [steps=5] [targets=6] [classes=80] [channels_last=auto|0|1]
//                   [optimizer=sgd|adamw] [clip=10]
// (channels_last=auto: the layout the trainer picks on the CPU, Family::channels_last_on_cpu)
#include "median.h"
#include "core/config.h"
#include "models/family.h"
#include "models/model.h"
#include "models/targets.h"
#include "train/optimizer.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <map>
#include <string>

using namespace libreyolo::models;
using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> args{{"model", "yolov5n"}, {"imgsz", "320"}, {"batch", "8"}, {"steps", "5"}, {"targets", "6"},
                                          {"classes", "80"}, {"channels_last", "auto"}, {"optimizer", "sgd"}, {"clip", "10"}};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto eq = arg.find('=');
    if (eq == std::string::npos || !args.count(arg.substr(0, eq))) {
      fmt::print(stderr, "usage: yolo_step [model=yolov5n] [imgsz=320] [batch=8] [steps=5] [targets=6] [classes=80] "
                         "[channels_last=auto|0|1] [optimizer=sgd|adamw] [clip=10]\n");
      return 2;
    }
    args[arg.substr(0, eq)] = arg.substr(eq + 1);
  }
  const int imgsz = std::stoi(args["imgsz"]), batch = std::stoi(args["batch"]), steps = std::stoi(args["steps"]);
  const int per_image = std::stoi(args["targets"]), classes = std::stoi(args["classes"]);
  at::manual_seed(0);
  const ModelName name = parse_model_name(args["model"]);
  const Family& family = libreyolo::models::family(name.family);
  Model model = build_model(name, classes);
  model.module->train();
  const bool channels_last = args["channels_last"] == "auto" ? family.channels_last_on_cpu() : args["channels_last"] == "1";
  if (channels_last) to_channels_last(*model.module);
  libreyolo::config::Config gains(libreyolo::config::command_train, libreyolo::models::option_table());  // YOLOv5's hyp.scratch-low gains (YOLOv9 reads box, cls)
  for (const auto& [key, value] : {std::pair{"box", "0.05"}, {"cls", "0.5"}, {"obj", "1.0"}}) {
    gains.set(key, value, libreyolo::config::Source::command_line);
  }
  const auto loss = family.make_loss({.image_size = imgsz, .classes = classes}, gains);
  // the trainer's optimizer: its parameter groups (BatchNorm weights, decayed weights, biases)
  const bool adamw = args["optimizer"] == "adamw";
  const double clip = std::stod(args["clip"]);
  const auto optimizer = libreyolo::train::make_optimizer(
      libreyolo::train::parameter_groups(*model.module),
      {.name = args["optimizer"], .lr0 = adamw ? 0.004 : 0.01, .momentum = 0.937, .nesterov = true, .weight_decay = adamw ? 0.05 : 5e-4});
  std::vector<at::Tensor> parameters = model.module->parameters();
  const at::Tensor images = channels_last ? at::rand({batch, 3, imgsz, imgsz}).contiguous(at::MemoryFormat::ChannelsLast)
                                          : at::rand({batch, 3, imgsz, imgsz});
  const std::int64_t count = static_cast<std::int64_t>(batch) * per_image;
  const at::Tensor sizes = 0.05 + 0.3 * at::rand({count, 2});
  const at::Tensor rows = at::cat({at::arange(batch, at::kFloat).repeat_interleave(per_image).unsqueeze(1),
                                   at::randint(classes, {count, 1}, at::kFloat), sizes / 2 + (1 - sizes) * at::rand({count, 2}), sizes},
                                  1);
  std::map<std::string, std::vector<double>> phases;
  for (int step = 0; step <= steps; ++step) {
    auto start = Clock::now();
    const auto maps = model.forward_raw(images);
    const double forward = since(start);
    start = Clock::now();
    const TargetBatch targets = pad_targets(rows, batch, imgsz, imgsz);
    const at::Tensor total = (*loss)(maps, targets).total;
    const double loss_time = since(start);
    start = Clock::now();
    optimizer->zero_grad();
    total.backward();
    const double backward = since(start);
    start = Clock::now();
    std::vector<at::Tensor> grads;
    for (const auto& p : parameters) {
      if (p.grad().defined()) grads.push_back(p.grad());
    }
    if (clip > 0) libreyolo::train::clip_gradients(grads, clip);
    optimizer->step();
    const double optimizer_step = since(start);
    if (step == 0) continue;  // warm-up
    phases["forward_s"].push_back(forward);
    phases["loss_s"].push_back(loss_time);
    phases["backward_s"].push_back(backward);
    phases["optimizer_s"].push_back(optimizer_step);
    phases["step_s"].push_back(forward + loss_time + backward + optimizer_step);
  }
  nlohmann::json out = {{"bench", "yolo_step"}, {"implementation", "libreyolo (C++)"}, {"model", args["model"]},
                        {"imgsz", imgsz}, {"batch", batch}, {"targets_per_image", per_image}, {"steps", steps},
                        {"threads", at::get_num_threads()}, {"channels_last", channels_last}, {"optimizer", args["optimizer"]},
                        {"clip", clip}};
  for (const auto& [phase, values] : phases) out[phase] = libreyolo::bench::median(values);
  fmt::print("{}\n", out.dump());
  return 0;
}
