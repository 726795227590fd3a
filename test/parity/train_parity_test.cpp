// Parity of the training parts with libreyolo 1.6.0 (references from make_train_reference.py):
// every scheduler's LR (and YOLOv9's momentum warmup) at every iteration, the optimizer's
// parameter groups (same tensors, same order, same weight decay) and EMA weights after updates;
// from yolov5 7.0.14's train.py, scheduler=linear_epoch with warmup_bias_lr, through the trainer's
// Optimisation::apply_schedule on a three-group SGD, and its nominal batch (nbs 64): the batches it
// steps the optimizer after, its accumulate and scaled weight decay, through TrainState's windows.
//   train_parity_test DIR
#include "models/checkpoint.h"
#include "models/model.h"
#include "models/safetensors.h"
#include "train/ema.h"
#include "train/optimizer.h"
#include "train/schedule.h"
#include "train/setup.h"
#include "train/train_state.h"
#include "models/yolox/model.h"

#include <ATen/ATen.h>
#include <fmt/core.h>
#include <nlohmann/json.hpp>
#include <torch/optim/sgd.h>

#include <cmath>
#include <fstream>

using namespace libreyolo;

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const std::string dir = argv[1];
  bool ok = true;
  try {
    const auto ref = models::read_safetensors(dir + "/train.safetensors");
    std::ifstream json_file(dir + "/train.json");
    const auto info = nlohmann::json::parse(json_file);
    const int ipe = info["ipe"], epochs = info["epochs"];
    struct Case { const char* kind; double warmup, start, min_ratio; int no_aug; };
    for (const Case c : {Case{"yoloxwarmcos", 3, 0.001, 0.05, 2}, Case{"linear", 3, 0.0001, 0.01, 0},
                         Case{"cos", 3, 0.0001, 0.01, 0}, Case{"flat_cosine", 2, 1e-6, 0.05, 4},
                         Case{"constant", 1, 0.002, 1.0, 0}}) {
      train::ScheduleOptions options{.kind = c.kind, .lr0 = 0.01, .warmup_epochs = c.warmup, .warmup_lr_start = c.start,
                                     .min_lr_ratio = c.min_ratio, .no_aug_epochs = c.no_aug, .steps_per_epoch = ipe,
                                     .epochs = epochs, .warmup_momentum = std::nullopt};
      if (std::string(c.kind) == "linear") options.warmup_momentum = 0.8;
      const train::Schedule schedule(options);
      const at::Tensor lrs = ref.at(std::string("lr.") + c.kind);
      double worst = 0, worst_momentum = 0;
      for (std::int64_t i = 0; i < lrs.numel(); ++i) {
        worst = std::max(worst, std::abs(schedule.lr(i) - lrs[i].item<double>()));
        if (ref.count(std::string("momentum.") + c.kind)) {
          worst_momentum = std::max(worst_momentum, std::abs(*schedule.momentum(i) - ref.at(std::string("momentum.") + c.kind)[i].item<double>()));
        }
      }
      const bool same = worst < 1e-12 && worst_momentum < 1e-12;
      fmt::print("schedule {:<13} {} iterations, max |lr diff| {:.2g}, max |momentum diff| {:.2g} {}\n", c.kind,
                 lrs.numel(), worst, worst_momentum, same ? "ok" : "MISMATCH");
      ok = ok && same;
    }
    {  // the classifiers' recipe (our option defaults for mobilenetv4-s) against its trainer's schedule
      const auto config = models::parse_arguments(config::command_train, std::vector<std::string>{"model=mobilenetv4-s"});
      const train::Schedule schedule({.kind = config.get_text("scheduler"), .lr0 = 0.01, .warmup_epochs = config.get_real("warmup_epochs"),
                                      .warmup_lr_start = config.get_real("warmup_lr_start"),
                                      .min_lr_ratio = config.get_real("min_lr_ratio"),
                                      .no_aug_epochs = static_cast<int>(config.get_int("no_aug_epochs")), .steps_per_epoch = ipe,
                                      .epochs = epochs, .warmup_momentum = std::nullopt});
      const at::Tensor lrs = ref.at("lr.classify");
      double worst = 0;
      for (std::int64_t i = 0; i < lrs.numel(); ++i) worst = std::max(worst, std::abs(schedule.lr(i) - lrs[i].item<double>()));
      const bool same = worst < 1e-12 && schedule.lr(0) == 0.0;
      fmt::print("schedule classify (mobilenetv4-s's recipe) {} iterations, max |lr diff| {:.2g}, first step at lr {} {}\n",
                 lrs.numel(), worst, schedule.lr(0), same ? "ok" : "MISMATCH");
      ok = ok && same;
    }
    for (const auto& c : info["yolov5"]) {
      const int nb = c["nb"], v5_epochs = c["epochs"];
      const at::Tensor rows = ref.at(fmt::format("yolov5.{}x{}", nb, v5_epochs));
      train::Optimisation optim;
      const auto groups = [] {  // pg0, pg1, pg2 = BN weights, weights, biases: one tensor each
        train::ParameterGroups g;
        for (auto* list : {&g.bn, &g.weights, &g.biases}) list->push_back(at::zeros({1}).requires_grad_());
        return g;
      }();
      optim.optimizer = train::make_optimizer(groups, {.name = "sgd", .lr0 = c["lr0"], .momentum = c["momentum"]});
      optim.bias_group = groups.bias_group();
      optim.warmup_bias_lr = c["warmup_bias_lr"];
      optim.schedule.emplace(train::ScheduleOptions{.kind = "linear_epoch", .lr0 = c["lr0"], .warmup_epochs = c["warmup_epochs"],
                                                    .warmup_lr_start = 0.0, .min_lr_ratio = c["lrf"], .no_aug_epochs = 0,
                                                    .steps_per_epoch = nb, .epochs = v5_epochs,
                                                    .warmup_momentum = c["warmup_momentum"].get<double>(), .momentum = c["momentum"]});
      double worst_bias = 0, worst = 0, worst_momentum = 0;
      for (std::int64_t i = 0; i < rows.size(0); ++i) {
        optim.apply_schedule(i);
        const auto& bias = static_cast<const torch::optim::SGDOptions&>(optim.optimizer->param_groups()[2].options());
        worst_bias = std::max(worst_bias, std::abs(bias.lr() - rows[i][0].item<double>()));
        for (std::size_t g = 0; g < 2; ++g) worst = std::max(worst, std::abs(train::learning_rate(*optim.optimizer, g) - rows[i][1].item<double>()));
        worst_momentum = std::max(worst_momentum, std::abs(bias.momentum() - rows[i][2].item<double>()));
      }
      const bool same = *optim.bias_group == 2 && rows.size(0) == nb * v5_epochs && worst_bias < 1e-12 && worst < 1e-12 && worst_momentum < 1e-12;
      fmt::print("yolov5 linear_epoch, {} batches x {} epochs: max |lr diff| biases {:.2g}, others {:.2g}, momentum {:.2g} {}\n", nb,
                 v5_epochs, worst_bias, worst, worst_momentum, same ? "ok" : "MISMATCH");
      ok = ok && same;
    }
    ok = ok && info["yolov5"].size() == 2;
    for (const auto& c : info["yolov5_nbs"]) {  // the batches yolov5 steps after, with nbs = 64
      train::TrainState state;
      state.epochs = c["epochs"];
      state.batches_per_epoch = c["nb"];
      state.set_nominal_batch(c["nbs"], c["batch"], 3.0, /*ramp_windows=*/true);  // hyp.scratch-low's 3 warm-up epochs
      std::vector<std::int64_t> steps;
      bool schedule_same = true;
      for (state.epoch = 0; state.epoch < state.epochs; ++state.epoch) {
        for (state.batch = 0; state.batch < state.batches_per_epoch;) {
          const bool ends = state.window_ends();
          // the step's rates are those of its own batch, which the parity above proves lr(ni) gives
          schedule_same = schedule_same && (!ends || state.schedule_iteration() == state.global_batch());
          ++state.batch;
          if (ends) {
            steps.push_back(state.global_batch() - 1);
            state.record_step();
          }
        }
      }
      const auto expected = c["steps"].get<std::vector<std::int64_t>>();
      const double decay = 5e-4 * state.weight_decay_scale, expected_decay = c["weight_decay"];
      const bool same = steps == expected && state.accumulate == c["accumulate"].get<std::int64_t>() && schedule_same &&
                        std::abs(decay - expected_decay) < 1e-15 && state.optimizer_steps == static_cast<std::int64_t>(expected.size());
      fmt::print("yolov5 nbs 64, batch {}, {} batches x {} epochs: {} optimizer steps (train.py {}), accumulate {}, "
                 "weight_decay {:g} (train.py {:g}) {}\n", c["batch"].get<int>(), state.batches_per_epoch, state.epochs, steps.size(),
                 expected.size(), state.accumulate, decay, expected_decay, same ? "ok" : "MISMATCH");
      ok = ok && same;
    }
    ok = ok && info["yolov5_nbs"].size() == 4;
    {
      int differing = 0;
      for (const auto& row : info["aug_stop"]) {
        differing += train::strong_augmentation_stop(row[0].get<int>(), row[2].get<int>(), row[1].get<double>()) != row[3].get<int>();
      }
      fmt::print("strong augmentation stop: {} (epochs, ratio, no_aug_epochs) cases, {} differ {}\n", info["aug_stop"].size(),
                 differing, differing == 0 ? "ok" : "MISMATCH");
      ok = ok && differing == 0 && !info["aug_stop"].empty();
    }
    for (const auto& [family, size] : {std::pair{"yolox", "n"}, std::pair{"yolo9", "t"}}) {
      auto model = models::build_model({family, size}, 80);
      const auto groups = train::parameter_groups(*model.module);
      const auto& expected = info["groups"][fmt::format("{}-{}", family, size)];
      const std::vector<const std::vector<std::string>*> ours{&groups.bn_names, &groups.weight_names, &groups.bias_names};
      bool same = expected.size() == 3;
      for (std::size_t g = 0; same && g < 3; ++g) same = expected[g]["names"].get<std::vector<std::string>>() == *ours[g];
      const auto optimizer = train::make_optimizer(groups, {.name = "sgd", .lr0 = 0.01, .momentum = 0.9, .weight_decay = 5e-4});
      for (std::size_t g = 0; same && g < 3; ++g) {
        const auto& options = static_cast<const torch::optim::SGDOptions&>(optimizer->param_groups()[g].options());
        same = std::abs(options.weight_decay() - expected[g]["weight_decay"].get<double>()) < 1e-12;
      }
      fmt::print("groups {}-{}: pg0 {} / pg1 {} / pg2 {} tensors {}\n", family, size, groups.bn.size(),
                 groups.weights.size(), groups.biases.size(), same ? "ok (same names, order, decay)" : "MISMATCH");
      ok = ok && same;
    }
    models::yolox::Model model("n", 80);
    std::map<std::string, at::Tensor> base;
    for (const auto& [key, value] : ref) if (key.rfind("ema_base.", 0) == 0) base[key.substr(9)] = value;
    models::load_state_dict(*model, base, true);
    models::yolox::Model copy("n", 80);
    train::ModelEma ema(*model, copy.ptr(), 0.9, 3);
    for (int k = 1; k <= 5; ++k) {
      at::NoGradGuard no_grad;
      for (auto& [key, value] : models::state_dict(*model)) {
        if (at::isFloatingType(value.scalar_type())) value.copy_(base.at(key) * (1 + 0.1 * k));
      }
      ema.update(*model);
    }
    double worst = 0;
    bool same = true;
    for (const auto& [key, value] : models::state_dict(ema.module())) {
      const at::Tensor& expected = ref.at("ema." + key);
      worst = std::max(worst, (value.to(at::kDouble) - expected.to(at::kDouble)).abs().max().item<double>());
      same = same && at::allclose(value, expected, 1e-6, 1e-6);
    }
    fmt::print("ema after 5 updates (decay 0.9, tau 3): max |diff| {:.2g} {}\n", worst, same ? "ok" : "MISMATCH");
    ok = ok && same;
  } catch (const std::exception& error) {
    fmt::print("error: {}\n", error.what());
    return 1;
  }
  return ok ? 0 : 1;
}
