#include "core/config.h"
#include "models/checkpoint.h"
#include "models/family.h"
#include "core/error.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>
#include "catch.h"  // last: see catch.h

using namespace libreyolo;
using namespace libreyolo::config;
namespace fs = std::filesystem;

namespace {

Config train(std::vector<std::string> arguments) { return models::parse_arguments(command_train, arguments); }

std::string usage_error_of(std::vector<std::string> arguments, Command command = command_train) {
  try {
    models::parse_arguments(command, arguments);
  } catch (const UsageError& error) {
    return error.what();
  }
  return "";
}

fs::path temp_file(const std::string& name, const std::string& content) {
  const auto path = fs::temp_directory_path() / (std::to_string(::getpid()) + "_" + name);
  std::ofstream(path) << content;
  return path;
}

}  // namespace

TEST_CASE("key=value, --key value and --key=value all set a key", "[config]") {
  const auto config = train({"epochs=50", "--batch", "8", "--imgsz=480x640", "lr0=0.02", "name=run"});
  CHECK(config.get_int("epochs") == 50);
  CHECK(config.get_int("batch") == 8);
  CHECK(config.get_image_size("imgsz") == ImageSize{480, 640});
  CHECK(config.get_real("lr0") == Approx(0.02));
  CHECK(config.get_text("name") == "run");
  CHECK(config.source("epochs") == Source::command_line);
  CHECK(config.source("patience") == Source::table_default);
}

TEST_CASE("bools: bare key, --key, --key false, --no-key, key=0", "[config]") {
  CHECK(train({"exist_ok"}).get_bool("exist_ok"));
  CHECK(train({"--exist_ok"}).get_bool("exist_ok"));
  CHECK(train({"--exist-ok"}).get_bool("exist_ok"));
  CHECK_FALSE(train({"--amp", "false"}).get_bool("amp"));
  CHECK_FALSE(train({"--no-amp"}).get_bool("amp"));
  CHECK_FALSE(train({"amp=0"}).get_bool("amp"));
  // --key followed by something that is not a bool leaves that token alone
  const auto config = train({"--cuda_graph", "epochs=3"});
  CHECK(config.get_bool("cuda_graph"));
  CHECK(config.get_int("epochs") == 3);
}

TEST_CASE("hyphens in keys read as underscores", "[config]") {
  CHECK(train({"warmup-epochs=2"}).get_real("warmup_epochs") == Approx(2.0));
  CHECK(train({"--no-aug-epochs", "4"}).get_int("no_aug_epochs") == 4);
}

TEST_CASE("the last of repeated keys wins", "[config]") { CHECK(train({"epochs=5", "epochs=7"}).get_int("epochs") == 7); }

TEST_CASE("unknown keys are usage errors with up to 3 close matches as key=default", "[config][errors]") {
  const auto message = usage_error_of({"epoch=3"});
  CHECK(message.find("'epoch' is not a valid key for 'train'") != std::string::npos);
  CHECK(message.find("epochs=300") != std::string::npos);
  const auto far = usage_error_of({"qqqqq=1"});
  CHECK(far.find("not a valid key") != std::string::npos);
  CHECK(far.find("Similar keys") == std::string::npos);
  const auto many = usage_error_of({"warmup=1"});
  const auto list = many.substr(many.find("Similar keys"));
  CHECK(std::count(list.begin(), list.end(), '=') <= 3);
}

TEST_CASE("a key of another command is refused with the commands that take it", "[config][errors]") {
  const auto message = usage_error_of({"source=img.jpg"});
  CHECK(message.find("not accepted by 'train'") != std::string::npos);
  CHECK(message.find("predict") != std::string::npos);
  CHECK(models::parse_arguments(command_predict, std::vector<std::string>{"source=img.jpg"}).get_text("source") == "img.jpg");
}

TEST_CASE("a non-bool key without a value says how to write it", "[config][errors]") {
  CHECK(usage_error_of({"imgsz"}).find("try 'imgsz=640'") != std::string::npos);
  CHECK(usage_error_of({"--epochs"}).find("missing its value") != std::string::npos);
  CHECK(usage_error_of({"=5"}).find("cannot read argument") != std::string::npos);
}

TEST_CASE("wrong types and ranges name the key and the value", "[config][errors]") {
  CHECK(usage_error_of({"batch=big"}).find("'batch=big'") != std::string::npos);
  CHECK(usage_error_of({"momentum=1.5"}).find("out of range") != std::string::npos);
}

TEST_CASE("Ultralytics spellings map onto LibreYOLO keys with a note", "[aliases]") {
  const auto config = train({"lrf=0.02", "close_mosaic=10", "fliplr=0.25", "hsv_h=0.02", "hsv_s=0.5", "hsv_v=0.3",
                             "mosaic_prob=0.7", "mixup_prob=0.1", "plots=true"});
  CHECK(config.get_real("min_lr_ratio") == Approx(0.02));
  CHECK(config.get_int("no_aug_epochs") == 10);
  CHECK(config.get_real("flip_prob") == Approx(0.25));
  CHECK(config.get_real("hsv_hue") == Approx(0.02));
  CHECK(config.get_real("hsv_saturation") == Approx(0.5));
  CHECK(config.get_real("hsv_value") == Approx(0.3));
  CHECK(config.get_real("mosaic") == Approx(0.7));
  CHECK(config.get_real("mixup") == Approx(0.1));
  CHECK(config.get_bool("save_plots"));
  CHECK(config.source("min_lr_ratio") == Source::command_line);
  bool noted = false;
  for (const auto& note : config.notes()) noted = noted || note.find("'lrf'") != std::string::npos;
  CHECK(noted);
}

TEST_CASE("value-changing aliases: scale and cos_lr", "[aliases]") {
  const auto pair = train({"scale=0.9"}).get_pair("mosaic_scale");
  CHECK(pair.first == Approx(0.1));
  CHECK(pair.second == Approx(1.9));
  CHECK(train({"cos_lr"}).get_text("scheduler") == "cos");
  CHECK(train({"cos_lr=false", "model=yolo9-t"}).get_text("scheduler") == "linear");
  CHECK(usage_error_of({"scale=2"}).find("out of range") != std::string::npos);
  // an alias typo gets a suggestion too
  CHECK(usage_error_of({"close_mosiac=3"}).find("close_mosaic") != std::string::npos);
}

TEST_CASE("family defaults replace table defaults, never user values", "[family]") {
  const auto yolo9 = train({"model=yolo9-s"});
  CHECK(yolo9.family() == "yolo9");
  CHECK(yolo9.size() == "s");
  CHECK(yolo9.get_real("momentum") == Approx(0.937));
  CHECK(yolo9.get_text("scheduler") == "linear");
  CHECK(yolo9.get_real("min_lr_ratio") == Approx(0.01));
  CHECK(yolo9.get_text("name") == "yolo9_exp");
  CHECK(yolo9.source("momentum") == Source::family_default);

  const auto yolox = train({"model=yolox-s"});
  CHECK(yolox.get_real("momentum") == Approx(0.9));
  CHECK(yolox.get_text("scheduler") == "yoloxwarmcos");
  CHECK(yolox.get_pair("mosaic_scale").first == Approx(0.1));

  const auto user = train({"model=yolo9-t", "momentum=0.5", "name=mine"});
  CHECK(user.get_real("momentum") == Approx(0.5));
  CHECK(user.get_text("name") == "mine");
  CHECK(user.source("momentum") == Source::command_line);
}

TEST_CASE("size overrides: YOLOX-nano trains at 416 without mixup", "[family]") {
  const auto nano = train({"model=yolox-n"});
  CHECK(nano.get_image_size("imgsz") == ImageSize{416, 416});
  CHECK(nano.get_real("mixup") == Approx(0.0));
  CHECK(nano.get_real("mosaic") == Approx(0.5));
  CHECK(train({"model=yolox-n", "imgsz=320"}).get_image_size("imgsz") == ImageSize{320, 320});
}

TEST_CASE("model names: unknown or missing is a model error, checkpoints tell their family", "[family]") {
  CHECK_THROWS_AS(train({"model=yolov6s"}), ModelError);
  CHECK_THROWS_AS(train({"model=LibreYOLO9t.pt"}), ModelError);  // no such file here or in weights/
  CHECK_THROWS_AS(train({"model=runs/train/exp/weights/last.pt"}), ModelError);
  // A checkpoint named last.pt says yolox-n in its metadata: the YOLOX-nano defaults apply.
  libreyolo::models::Checkpoint checkpoint;
  checkpoint.family = "yolox";
  checkpoint.size = "n";
  checkpoint.names = libreyolo::models::default_class_names(80);
  const auto path = temp_file("last.pt", "");
  libreyolo::models::write_checkpoint(path, checkpoint);
  const auto config = train({"model=" + path.string()});
  CHECK(config.family() == "yolox");
  CHECK(config.get_image_size("imgsz") == ImageSize{416, 416});
}

TEST_CASE("cfg= loads overrides; the command line beats the file, the file beats the family", "[cfg_file]") {
  const auto path = temp_file("override.yaml", "epochs: 12\nmomentum: 0.8\nmosaic_scale: [0.3, 1.7]\nimgsz: [480, 640]\nnbs: null\nfliplr: 0.1\n");
  const auto config = train({"model=yolox-s", "cfg=" + path.string(), "epochs=20"});
  CHECK(config.get_int("epochs") == 20);
  CHECK(config.get_real("momentum") == Approx(0.8));
  CHECK(config.source("momentum") == Source::cfg_file);
  CHECK(config.get_pair("mosaic_scale").first == Approx(0.3));
  CHECK(config.get_image_size("imgsz") == ImageSize{480, 640});
  CHECK(config.is_none("nbs"));
  CHECK(config.get_real("flip_prob") == Approx(0.1));
  fs::remove(path);
}

TEST_CASE("cfg file mistakes name the file and the key", "[cfg_file][errors]") {
  CHECK(usage_error_of({"cfg=/nonexistent/x.yaml"}).find("not found") != std::string::npos);
  const auto bad_key = temp_file("badkey.yaml", "epoch: 3\n");
  const auto message = usage_error_of({"cfg=" + bad_key.string()});
  CHECK(message.find(bad_key.string()) != std::string::npos);
  CHECK(message.find("epochs=300") != std::string::npos);
  const auto bad_value = temp_file("badvalue.yaml", "lr0: 5\n");
  CHECK(usage_error_of({"cfg=" + bad_value.string()}).find("'lr0=5' is out of range") != std::string::npos);
  const auto bad_yaml = temp_file("badyaml.yaml", "epochs: [1,\n");
  CHECK(usage_error_of({"cfg=" + bad_yaml.string()}).find("not valid YAML") != std::string::npos);
  for (const auto& path : {bad_key, bad_value, bad_yaml}) fs::remove(path);
}

TEST_CASE("train_config.yaml holds every key and loads back to the same values", "[cfg_file]") {
  const auto original = train({"model=yolo9-t", "epochs=7", "imgsz=480x640", "nbs=64", "amp_dtype=bf16", "name=x y"});
  const std::string yaml = original.to_yaml();
  for (const auto& spec : libreyolo::models::option_table()) {
    INFO(spec.name);
    const bool written = yaml.find(fmt::format("\n{}:", spec.name)) != std::string::npos ||
                         yaml.starts_with(std::string(spec.name) + ":");
    CHECK(written == ((spec.commands & command_train) != 0));
  }
  const auto path = temp_file("train_config.yaml", yaml);
  const auto reloaded = train({"cfg=" + path.string()});
  for (const auto& spec : libreyolo::models::option_table()) {
    if (spec.name == "cfg" || !(spec.commands & command_train)) continue;
    INFO(spec.name);
    CHECK(format_value(reloaded.value(spec.name)) == format_value(original.value(spec.name)));
  }
  fs::remove(path);
}

TEST_CASE("val and predict default their project folders", "[config]") {
  CHECK(models::parse_arguments(command_val, std::vector<std::string>{}).get_text("project") == "runs/val");
  CHECK(models::parse_arguments(command_predict, std::vector<std::string>{}).get_text("project") == "runs/predict");
  CHECK(train({}).get_text("project") == "runs/train");
}
