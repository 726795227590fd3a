// The training loop in-process on a tiny synthetic dataset.
#include "core/config.h"
#include "core/error.h"
#include "data/synth.h"
#include "models/checkpoint.h"
#include "train/trainer.h"

#include <torch/torch.h>
#include "test_util.h"

#include <filesystem>
#include <sstream>
#include <fstream>
#include <functional>
#include <map>
#include <unistd.h>

#include "catch.h"  // last: see catch.h

using namespace libreyolo;
namespace fs = std::filesystem;

namespace {

struct TempDir : test_util::TempDir {
  TempDir() : test_util::TempDir("trainer") {}
};

// A fresh YOLOv9-t for the synthetic classes, written as a checkpoint after `change` (if any)
// has edited its tensors. Returns the tensors written.
models::NamedTensors write_yolo9t_checkpoint(const fs::path& path, const std::function<void(at::Tensor&)>& change = {}) {
  auto built = models::load_model("yolo9-t", 4);
  models::Checkpoint checkpoint;
  checkpoint.family = "yolo9";
  checkpoint.size = "t";
  checkpoint.class_count = 4;
  checkpoint.names = data::synth_class_names();
  checkpoint.model = models::state_dict(*built.model.module);
  if (change) {
    for (auto& [name, tensor] : checkpoint.model) change(tensor);
  }
  models::write_checkpoint(path, checkpoint);
  return checkpoint.model;
}

}  // namespace

TEST_CASE("A checkpoint of NaN weights is refused before training, naming the file", "[trainer]") {
  TempDir dir;
  const auto synth = data::write_synthetic_dataset({.out = dir.path / "ds", .train_images = 8, .val_images = 4, .image_size = 64});
  write_yolo9t_checkpoint(dir.path / "nan.pt", [](at::Tensor& tensor) {
    if (at::isFloatingType(tensor.scalar_type())) tensor = at::full_like(tensor, std::nan(""));
  });
  const std::vector<std::string> arguments{"model=" + (dir.path / "nan.pt").string(), "data=" + synth.yaml.string(),
                                           "epochs=1", "batch=4", "imgsz=64", "workers=0", "quiet=true"};
  const auto config = models::parse_arguments(config::command_train, arguments);
  fs::create_directories(dir.path / "run");
  train::HookList hooks;
  try {
    train::run_training(config, dir.path / "run", hooks);
    FAIL("training started from NaN weights");
  } catch (const ModelError& error) {
    CHECK_THAT(error.what(), Catch::Contains((dir.path / "nan.pt").string() + ": tensor ") &&
                                 Catch::Contains("holds NaN or infinite values"));
  }
  CHECK_FALSE(fs::exists(dir.path / "run" / "weights" / "last.pt"));
}

// Fills one weight tensor with NaN at a given step (a transient divergence), or at every step
// (at_step 0: a divergence no recovery can cure).
struct PoisonOnce : train::TrainHook {
  std::int64_t at_step;
  torch::nn::Module* model = nullptr;
  std::int64_t steps = 0;
  explicit PoisonOnce(std::int64_t step) : at_step(step) {}
  void on_train_start(const train::RunInfo& run, const train::TrainState&) override { model = run.model; }
  void on_step_start(const train::TrainState&) override {
    if (++steps != at_step && at_step != 0) return;
    at::NoGradGuard no_grad;
    model->parameters().front().fill_(std::nan(""));
  }
};

TEST_CASE("A divergence that comes back: three recoveries at 1/2, 1/4, 1/8 the learning rate, then a clear failure", "[trainer]") {
  TempDir dir;
  const auto synth = data::write_synthetic_dataset({.out = dir.path / "ds", .train_images = 8, .val_images = 4, .image_size = 64});
  const std::vector<std::string> arguments{"model=yolo9-t", "data=" + synth.yaml.string(), "epochs=1", "batch=4",
                                           "imgsz=64", "workers=0", "aux_weight=0", "quiet=true"};
  const auto config = models::parse_arguments(config::command_train, arguments);
  fs::create_directories(dir.path / "run");
  try {
    train::HookList hooks;
    hooks.add(std::make_unique<PoisonOnce>(0));
    train::run_training(config, dir.path / "run", hooks);
    FAIL("training that diverges at every step did not stop");
  } catch (const RuntimeError& error) {
    CHECK_THAT(error.what(), Catch::Contains("training diverged again after 3 recoveries, the last at 0.125x the learning rate") &&
                                 Catch::Contains("no checkpoint was written"));
    CHECK(static_cast<int>(error.exit_code()) == 1);
  }
  CHECK_FALSE(fs::exists(dir.path / "run" / "weights" / "last.pt"));  // no file of NaN
  const std::string status = test_util::read_all(dir.path / "run" / "status.json");
  CHECK_THAT(status, Catch::Contains("\"failed\"") && Catch::Contains("\"message\""));
  const std::string log = test_util::read_all(dir.path / "run" / "train.log");
  CHECK_THAT(log, Catch::Contains("half the learning rate (lr x0.5 from now on; recovery 1/3)") &&
                      Catch::Contains("(lr x0.25 from now on; recovery 2/3)") && Catch::Contains("(lr x0.125 from now on; recovery 3/3)"));
}

TEST_CASE("A transient NaN: the last good last.pt is reloaded and training goes on", "[trainer]") {
  TempDir dir;
  const auto synth = data::write_synthetic_dataset({.out = dir.path / "ds", .train_images = 8, .val_images = 4, .image_size = 64});
  const std::vector<std::string> arguments{"model=yolo9-t", "data=" + synth.yaml.string(), "epochs=3", "batch=4", "imgsz=64",
                                           "workers=0", "aux_weight=0", "val=false", "quiet=true"};
  const auto config = models::parse_arguments(config::command_train, arguments);
  fs::create_directories(dir.path / "run");
  train::HookList hooks;
  hooks.add(std::make_unique<PoisonOnce>(4));  // the second batch of epoch 2 (2 batches an epoch)
  const auto outcome = train::run_training(config, dir.path / "run", hooks);
  CHECK(outcome.exit_code == 0);
  CHECK(outcome.result["state"] == "completed");
  CHECK(outcome.result["epochs_completed"] == 3);
  const std::string log = test_util::read_all(dir.path / "run" / "train.log");
  CHECK_THAT(log, Catch::Contains("reloading") && Catch::Contains("last.pt") && Catch::Contains("(lr x0.5 from now on; recovery 1/3)"));
  const auto last = models::read_checkpoint(dir.path / "run" / "weights" / "last.pt");
  // the rest of the run trained at half the schedule's learning rate, and a resume would keep it
  REQUIRE(last.extra("lr_scale"));
  CHECK(last.extra("lr_scale")->toDouble() == 0.5);
  fs::create_directories(dir.path / "clean");
  train::HookList no_hooks;
  train::run_training(config, dir.path / "clean", no_hooks);
  const auto final_lr = [](const fs::path& run) {  // lr/group0 of the last row of results.csv
    std::ifstream csv(run / "results.csv");
    std::string header, row, last_row;
    std::getline(csv, header);
    while (std::getline(csv, row)) last_row = row;
    const auto column = [](const std::string& line, std::size_t index) {
      std::stringstream fields(line);
      std::string field;
      for (std::size_t i = 0; i <= index; ++i) std::getline(fields, field, ',');
      return field;
    };
    std::size_t index = 0;
    while (column(header, index) != "lr/group0") ++index;
    return std::stod(column(last_row, index));
  };
  CHECK(final_lr(dir.path / "run") == Approx(0.5 * final_lr(dir.path / "clean")).epsilon(1e-9));
  for (const auto& [name, tensor] : last.model) {
    if (at::isFloatingType(tensor.scalar_type())) {
      INFO(name);
      CHECK(at::isfinite(tensor).all().item<bool>());
    }
  }
}

TEST_CASE("freeze=2 keeps the first two layer groups (weights and BatchNorm statistics) as they started", "[trainer]") {
  TempDir dir;
  const auto synth = data::write_synthetic_dataset({.out = dir.path / "ds", .train_images = 8, .val_images = 4, .image_size = 64});
  const models::NamedTensors initial = write_yolo9t_checkpoint(dir.path / "start.pt");
  const std::vector<std::string> arguments{"model=yolo9-t", "pretrained=" + (dir.path / "start.pt").string(),
                                           "data=" + synth.yaml.string(), "epochs=1", "batch=4", "imgsz=64", "workers=0",
                                           "aux_weight=0", "warmup_epochs=0", "quiet=true", "freeze=2"};
  const auto config = models::parse_arguments(config::command_train, arguments);
  fs::create_directories(dir.path / "run");
  train::HookList hooks;
  train::run_training(config, dir.path / "run", hooks);
  const auto trained = models::read_checkpoint(dir.path / "run" / "weights" / "last.pt");
  const auto* train_model = trained.extra("train_model");
  REQUIRE(train_model);
  std::map<std::string, at::Tensor> after;
  for (const auto& entry : train_model->toGenericDict()) after[entry.key().toStringRef()] = entry.value().toTensor();
  int frozen = 0, moved = 0;
  for (const auto& [name, before] : initial) {
    if (!at::isFloatingType(before.scalar_type()) || !after.count(name)) continue;
    const bool same = at::equal(before, after.at(name));
    if (name.rfind("backbone.conv0.", 0) == 0 || name.rfind("backbone.conv1.", 0) == 0) {
      INFO(name);
      CHECK(same);  // parameters and running statistics alike
      ++frozen;
    } else if (name.find("conv.weight") != std::string::npos) {
      moved += !same;
    }
  }
  CHECK(frozen >= 8);
  CHECK(moved > 10);  // the rest trained
}

TEST_CASE("RT-DETR from weights trains in LibreYOLO's fine-tune form (the stem frozen), and a resumed run keeps it", "[trainer][detr]") {
  TempDir dir;
  const auto synth = data::write_synthetic_dataset({.out = dir.path / "ds", .train_images = 4, .val_images = 2, .image_size = 160});
  const auto train = [&](const std::string& name, std::vector<std::string> extra) {
    std::vector<std::string> arguments{"data=" + synth.yaml.string(), "batch=2", "imgsz=160", "workers=0", "val=false",
                                       "quiet=true", "plots=false", "lr0=0.001", "lr_backbone=0.001"};
    arguments.insert(arguments.end(), extra.begin(), extra.end());
    fs::create_directories(dir.path / name);
    train::HookList hooks;
    train::run_training(models::parse_arguments(config::command_train, arguments), dir.path / name, hooks);
    return models::read_checkpoint(dir.path / name / "weights" / "last.pt");
  };
  const auto raw = [](const models::Checkpoint& c) {
    std::map<std::string, at::Tensor> tensors;
    for (const auto& entry : c.extra("train_model")->toGenericDict()) tensors[entry.key().toStringRef()] = entry.value().toTensor();
    return tensors;
  };
  const std::string stem = "backbone.conv1.conv1_1.conv.weight", stage = "backbone.res_layers.0.blocks.0.branch2a.conv.weight";
  const auto scratch = train("scratch", {"model=rtdetr-r18", "epochs=1"});
  CHECK_FALSE(scratch.extra("fine_tune"));  // from scratch: nothing frozen, no mark
  CHECK(test_util::read_all(dir.path / "scratch" / "train.log").find("fine-tune form") == std::string::npos);

  const std::string weights = (dir.path / "scratch" / "weights" / "last.pt").string();
  const auto tuned = train("tuned", {"model=" + weights, "epochs=1"});
  CHECK(test_util::read_all(dir.path / "tuned" / "train.log").find("RT-DETR-r18 from weights: the backbone's stem frozen (LibreYOLO's fine-tune form)") != std::string::npos);
  REQUIRE(tuned.extra("fine_tune"));
  CHECK(tuned.extra("fine_tune")->toBool());
  REQUIRE(raw(tuned).count(stage));
  // a weights file's `model` (the EMA's weights) is what the new run starts from
  const std::map<std::string, at::Tensor> start(scratch.model.begin(), scratch.model.end());
  CHECK(at::equal(raw(tuned).at(stem), start.at(stem)));       // the stem did not train
  CHECK_FALSE(at::equal(raw(tuned).at(stage), start.at(stage)));  // the first stage did

  const auto resumed = train("tuned", {"model=" + (dir.path / "tuned" / "weights" / "last.pt").string(), "resume=true", "epochs=2"});
  CHECK(test_util::read_all(dir.path / "tuned" / "train.log").find("fine-tune form") != std::string::npos);
  CHECK(resumed.extra("fine_tune"));
  CHECK(at::equal(raw(resumed).at(stem), start.at(stem)));
}

TEST_CASE("deterministic=true trains with deterministic kernels and gives the process its choices back", "[trainer]") {
  // Ultralytics' key: cuDNN's deterministic algorithms without autotuning, ATen's deterministic
  // forms (warn only) and a fixed cuBLAS workspace; off by default (LibreYOLO sets none).
  struct Seen : train::TrainHook {
    bool algorithms = false, cudnn = false, benchmark = true;
    void on_step_start(const train::TrainState&) override {
      algorithms = at::globalContext().deterministicAlgorithms();
      cudnn = at::globalContext().deterministicCuDNN();
      benchmark = at::globalContext().benchmarkCuDNN();
    }
  };
  TempDir dir;
  const auto synth = data::write_synthetic_dataset({.out = dir.path / "ds", .train_images = 4, .val_images = 2, .image_size = 64});
  const bool algorithms_before = at::globalContext().deterministicAlgorithms();
  const bool cudnn_before = at::globalContext().deterministicCuDNN();
  for (const bool on : {true, false}) {
    INFO("deterministic=" << on);
    const auto config = models::parse_arguments(
        config::command_train, std::vector<std::string>{"model=yolo9-t", "data=" + synth.yaml.string(), "epochs=1", "batch=4", "imgsz=64", "workers=0",
                                "val=false", "quiet=true", "deterministic=" + std::string(on ? "true" : "false")});
    const fs::path run = dir.path / (on ? "on" : "off");
    fs::create_directories(run);
    auto owned = std::make_unique<Seen>();
    const Seen* seen = owned.get();
    train::HookList hooks;
    hooks.add(std::move(owned));
    train::run_training(config, run, hooks);
    CHECK(seen->algorithms == (on || algorithms_before));
    CHECK(seen->cudnn == (on || cudnn_before));
    if (on) {
      CHECK_FALSE(seen->benchmark);
      CHECK(std::string(std::getenv("CUBLAS_WORKSPACE_CONFIG")) == ":4096:8");
    }
    CHECK(at::globalContext().deterministicAlgorithms() == algorithms_before);  // given back
    CHECK(at::globalContext().deterministicCuDNN() == cudnn_before);
  }
}

TEST_CASE("No step's autograd graph outlives it: every parameter's AccumulateGrad is gone before the next step", "[trainer][graph]") {
  // PyTorch runs a kept AccumulateGrad node on the stream it was made on; a CUDA graph captured on
  // another stream then fails ("operation would make the legacy stream depend on a capturing
  // blocking stream", seen on an H200). A step's graph kept past the step (a loss tensor held,
  // say) keeps those nodes: checked here on the CPU, for YOLOv9 and RT-DETR.
  struct Watch : train::TrainHook {
    torch::nn::Module* model = nullptr;
    int steps = 0, kept = 0;
    std::string first;
    void on_train_start(const train::RunInfo& info, const train::TrainState&) override { model = info.model; }
    void on_step_start(const train::TrainState&) override {
      ++steps;
      for (const auto& item : model->named_parameters()) {
        if (item.value().requires_grad() && torch::autograd::impl::try_get_grad_accumulator(item.value())) {
          if (first.empty()) first = item.key();
          ++kept;
        }
      }
    }
  };
  TempDir dir;
  const auto synth = data::write_synthetic_dataset({.out = dir.path / "ds", .train_images = 8, .val_images = 2, .image_size = 64});
  for (const std::string model : {"yolo9-t", "rtdetr-r18"}) {
    INFO(model);
    const auto config = models::parse_arguments(config::command_train, std::vector<std::string>{"model=" + model, "data=" + synth.yaml.string(), "epochs=1",
                                                                          "batch=2", "imgsz=" + std::string(model == "yolo9-t" ? "64" : "128"), "workers=0", "val=false", "quiet=true"});
    const fs::path run = dir.path / model;
    fs::create_directories(run);
    auto owned = std::make_unique<Watch>();
    const Watch* watch = owned.get();
    train::HookList hooks;
    hooks.add(std::move(owned));
    train::run_training(config, run, hooks);
    CHECK(watch->steps == 4);
    INFO("first kept: " << watch->first);
    CHECK(watch->kept == 0);
  }
}
