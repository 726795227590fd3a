// The training loop in-process on a tiny synthetic dataset.
#include "core/config.h"
#include "core/error.h"
#include "data/synth.h"
#include "models/checkpoint.h"
#include "train/trainer.h"

#include <torch/torch.h>
#include "test_util.h"

#include <filesystem>
#include <functional>
#include <map>
#include <unistd.h>

#include "catch.h"  // last: see catch.h

using namespace libreyolo;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("libreyolo_trainer_" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
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

TEST_CASE("A NaN loss stops training with a runtime error after saving last.pt", "[trainer]") {
  TempDir dir;
  const auto synth = data::write_synthetic_dataset({.out = dir.path / "ds", .train_images = 8, .val_images = 4, .image_size = 64});
  // A checkpoint whose weights are all NaN: the first loss is NaN.
  write_yolo9t_checkpoint(dir.path / "nan.pt", [](at::Tensor& tensor) {
    if (at::isFloatingType(tensor.scalar_type())) tensor = at::full_like(tensor, std::nan(""));
  });
  const std::vector<std::string> arguments{"model=" + (dir.path / "nan.pt").string(), "data=" + synth.yaml.string(),
                                           "epochs=1", "batch=4", "imgsz=64", "workers=0", "quiet=true"};
  const auto config = models::parse_arguments(config::command_train, arguments);
  fs::create_directories(dir.path / "run");
  try {
    train::HookList hooks;
    train::run_training(config, dir.path / "run", hooks);
    FAIL("training on NaN weights did not stop");
  } catch (const RuntimeError& error) {
    CHECK_THAT(error.what(), Catch::Contains("training diverged"));
    CHECK(static_cast<int>(error.exit_code()) == 1);
  }
  CHECK(fs::exists(dir.path / "run" / "weights" / "last.pt"));
  CHECK_THAT(test_util::read_all(dir.path / "run" / "status.json"), Catch::Contains("\"failed\""));
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
