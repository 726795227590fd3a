// Accumulation windows: LibreYOLO's fixed windows per epoch and YOLOv5's nominal-batch ramp (whose
// step positions parity_train compares with yolov5's own train.py), through a resume and the trainer.
#include "core/config.h"
#include "data/synth.h"
#include "models/checkpoint.h"
#include "train/hooks.h"
#include "train/train_state.h"
#include "train/trainer.h"

#include "test_util.h"

#include <filesystem>
#include <memory>
#include <vector>

#include "catch.h"  // last: see catch.h

using namespace libreyolo;

namespace {

// The global batches after which `state` steps the optimizer, from its start to the end of its epochs.
std::vector<std::int64_t> step_batches(train::TrainState state) {
  std::vector<std::int64_t> steps;
  for (state.epoch = 0; state.epoch < state.epochs; ++state.epoch) {
    for (state.batch = 0; state.batch < state.batches_per_epoch;) {
      const bool ends = state.window_ends();
      ++state.batch;
      if (ends) {
        steps.push_back(state.global_batch() - 1);
        state.record_step();
      }
    }
  }
  return steps;
}

}  // namespace

TEST_CASE("YOLOv5's nominal batch: windows grow over the warm-up, then stay at round(nbs / batch)", "[train_state]") {
  train::TrainState state;
  state.epochs = 30;
  state.batches_per_epoch = 7;
  state.set_nominal_batch(64, 16, 3.0, /*ramp_windows=*/true);
  CHECK(state.accumulate == 4);
  CHECK(state.ramp_batches == 100);  // max(round(3 x 7), 100)
  CHECK(state.steps_per_epoch() == 7);  // the schedule counts batches
  CHECK(state.loss_divisor() == 1.0);
  const auto steps = step_batches(state);
  REQUIRE(steps.size() > 10);
  CHECK(steps.front() == 0);
  std::int64_t previous = -1, longest = 0;
  for (const std::int64_t step : steps) {
    CHECK(step - previous >= longest);  // never shrinks
    longest = step - previous;
    if (step > state.ramp_batches + 4) CHECK(longest == 4);
    previous = step;
  }
  // a resumed run at any epoch's start counts the steps before it and goes on with the same windows
  for (int epoch = 0; epoch <= state.epochs; ++epoch) {
    train::TrainState resumed = state;
    resumed.start_epoch = epoch;
    resumed.start_batch = 0;
    resumed.restore_steps();
    std::int64_t before = 0, last = -1;
    for (const std::int64_t step : steps) {
      if (step < epoch * state.batches_per_epoch) ++before, last = step;
    }
    CHECK(resumed.optimizer_steps == before);
    CHECK(resumed.last_step == last);
  }
  // Python's round, half to even: 7 / 2 = 3.5 gives 4, 5 / 2 = 2.5 gives 2
  state.set_nominal_batch(7, 2, 0.0, true);
  CHECK(state.accumulate == 4);
  CHECK(state.weight_decay_scale == Approx(8.0 / 7.0));
  CHECK(state.ramp_batches == 0);
  state.set_nominal_batch(5, 2, 3.0, false);  // LibreYOLO's nbs: no ramp, weight decay as given
  CHECK(state.accumulate == 2);
  CHECK_FALSE(state.ramp);
  CHECK(state.weight_decay_scale == 1.0);
  CHECK(state.loss_divisor() == 2.0);
}

TEST_CASE("The trainer steps where the windows end: YOLOv5's run on across epochs, LibreYOLO's restart with each", "[train_state]") {
  struct Steps : train::TrainHook {
    std::vector<std::int64_t> after;  // the global batch each optimizer step followed
    void after_backward(const train::TrainState& state) override { after.push_back(state.global_batch() - 1); }
  };
  test_util::TempDir dir("train_state");
  // 6 images at batch 2: 3 batches an epoch; nbs=7 asks for windows of 4
  const auto synth = data::write_synthetic_dataset({.out = dir.path / "ds", .train_images = 6, .val_images = 2, .image_size = 64});
  for (const auto& [model, expected] : {std::pair{std::string("yolov5n"), std::vector<std::int64_t>{3, 7, 11}},
                                        std::pair{std::string("yolo9-t"), std::vector<std::int64_t>{2, 5, 8, 11}}}) {
    INFO(model);
    const auto config = models::parse_arguments(
        config::command_train, std::vector<std::string>{"model=" + model, "data=" + synth.yaml.string(), "epochs=4", "batch=2", "imgsz=64",
                                                        "workers=0", "val=false", "quiet=true", "nbs=7", "warmup_epochs=0", "mosaic=0"});
    const auto run = dir.path / model;
    std::filesystem::create_directories(run);
    auto owned = std::make_unique<Steps>();
    const Steps* steps = owned.get();
    train::HookList hooks;
    hooks.add(std::move(owned));
    train::run_training(config, run, hooks);
    CHECK(steps->after == expected);
  }
}
