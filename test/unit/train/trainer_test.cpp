// The training loop in-process on a tiny synthetic dataset.
#include "core/config.h"
#include "core/error.h"
#include "data/synth.h"
#include "models/checkpoint.h"
#include "train/trainer.h"

#include <torch/torch.h>
#include "test_util.h"

#include <filesystem>
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

}  // namespace

TEST_CASE("A NaN loss stops training with a runtime error after saving last.pt", "[trainer]") {
  TempDir dir;
  const auto synth = data::write_synthetic_dataset({.out = dir.path / "ds", .train_images = 8, .val_images = 4, .image_size = 64});
  // A checkpoint whose weights are all NaN: the first loss is NaN.
  auto built = models::load_model("yolo9-t", 4);
  models::Checkpoint poisoned;
  poisoned.family = "yolo9";
  poisoned.size = "t";
  poisoned.class_count = 4;
  poisoned.names = data::synth_class_names();
  poisoned.model = models::state_dict(*built.model.module);
  for (auto& [name, tensor] : poisoned.model) {
    if (at::isFloatingType(tensor.scalar_type())) tensor = at::full_like(tensor, std::nan(""));
  }
  models::write_checkpoint(dir.path / "nan.pt", poisoned);
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
  auto start = models::load_model("yolo9-t", 4);
  models::Checkpoint initial;
  initial.family = "yolo9";
  initial.size = "t";
  initial.class_count = 4;
  initial.names = data::synth_class_names();
  initial.model = models::state_dict(*start.model.module);
  models::write_checkpoint(dir.path / "start.pt", initial);
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
  for (const auto& [name, before] : initial.model) {
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
