#include "core/error.h"
#include "models/checkpoint.h"
#include "models/torch_file.h"
#include "models/yolo9/model.h"
#include "train/checkpoints.h"

#include <ATen/ATen.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <fmt/format.h>
#include <unistd.h>
#include <fstream>

#include "test_util.h"
#include "catch.h"  // last: see catch.h

using namespace libreyolo;
using namespace libreyolo::models;
using namespace std::string_literals;
namespace fs = std::filesystem;

namespace {

struct TempDir : test_util::TempDir {
  TempDir() : test_util::TempDir("ckpt") {}
};

// A YOLOX-n checkpoint of `built`'s weights, for 3 classes.
Checkpoint yolox_n_checkpoint(const LoadedModel& built) {
  Checkpoint checkpoint;
  checkpoint.family = "yolox";
  checkpoint.size = "n";
  checkpoint.class_count = 3;
  checkpoint.names = {"cat", "dog", "bird"};
  checkpoint.image_size = 416;
  checkpoint.model = state_dict(*built.model.module);
  return checkpoint;
}

// A torch.save-layout archive whose data.pkl is `pickle` and whose data/0 holds `storage`.
void write_archive(const fs::path& path, const std::string& pickle, const std::string& storage = {}) {
  caffe2::serialize::PyTorchStreamWriter writer(path.string());
  writer.writeRecord("data.pkl", pickle.data(), pickle.size());
  writer.writeRecord("byteorder", "little", 6);
  if (!storage.empty()) writer.writeRecord("data/0", storage.data(), storage.size());
  writer.writeEndOfFile();
}

// The raw maps of `model` in eval mode, without autograd.
std::vector<at::Tensor> eval_outputs(Model& model, const at::Tensor& input) {
  torch::NoGradGuard no_grad;
  model.module->eval();
  return model.forward(input);
}

void check_equal(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  REQUIRE(!a.empty());
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].sizes() == b[i].sizes());
    CHECK(at::equal(a[i], b[i]));
  }
}

std::string message_of(const std::function<void()>& run) {
  try {
    run();
  } catch (const ModelError& error) {
    return error.what();
  }
  return "no ModelError";
}

}  // namespace

TEST_CASE("Checkpoints round-trip in C++ with metadata, extras and exact weights", "[checkpoint]") {
  TempDir dir;
  LoadedModel built = load_model("yolox-n", 3);
  torch::manual_seed(0);
  {
    torch::NoGradGuard no_grad;
    for (auto& p : built.model.module->parameters()) p.uniform_(-0.1, 0.1);
  }
  Checkpoint checkpoint = yolox_n_checkpoint(built);
  c10::impl::GenericDict config(c10::StringType::get(), c10::AnyType::get());
  config.insert("lr0", 0.01);
  config.insert("mosaic", true);
  config.insert("scheduler", std::string("cos"));
  config.insert("none", c10::IValue());
  c10::impl::GenericList list(c10::AnyType::get());
  list.push_back(static_cast<std::int64_t>(-70000));
  list.push_back(static_cast<std::int64_t>(1) << 40);
  list.push_back(at::arange(4, at::kBFloat16));
  checkpoint.set_extra("epoch", static_cast<std::int64_t>(7));
  checkpoint.set_extra("config", config);
  checkpoint.set_extra("history", list);
  checkpoint.set_extra("pair", c10::ivalue::Tuple::create({c10::IValue(1.5), c10::IValue(std::string("x"))}));
  write_checkpoint(dir.path / "a.pt", checkpoint);

  const Checkpoint back = read_checkpoint(dir.path / "a.pt");
  CHECK(back.family == "yolox");
  CHECK(back.size == "n");
  CHECK(back.class_count == 3);
  CHECK(back.names == std::vector<std::string>{"cat", "dog", "bird"});
  CHECK(back.image_size == 416);
  CHECK(back.schema_version == "1.0");
  REQUIRE(back.model.size() == checkpoint.model.size());
  for (std::size_t i = 0; i < back.model.size(); ++i) {
    CHECK(back.model[i].first == checkpoint.model[i].first);
    CHECK(at::equal(back.model[i].second, checkpoint.model[i].second));
  }
  REQUIRE(back.extra("epoch"));
  CHECK(back.extra("epoch")->toInt() == 7);
  const auto cfg = back.extra("config")->toGenericDict();
  CHECK(cfg.at("lr0").toDouble() == 0.01);
  CHECK(cfg.at("mosaic").toBool());
  CHECK(cfg.at("scheduler").toStringRef() == "cos");
  CHECK(cfg.at("none").isNone());
  const auto history = back.extra("history")->toList();
  CHECK(history.get(0).toInt() == -70000);
  CHECK(history.get(1).toInt() == (static_cast<std::int64_t>(1) << 40));
  CHECK(at::equal(history.get(2).toTensor(), at::arange(4, at::kBFloat16)));
  CHECK(back.extra("pair")->toTupleRef().elements()[0].toDouble() == 1.5);

  // model=path builds the family and size the file names, with its class count, and gives the
  // same outputs as the model that was saved.
  LoadedModel loaded = load_model((dir.path / "a.pt").string(), 80);
  CHECK(loaded.class_count == 3);
  CHECK(loaded.model.display_name == "YOLOX-n");
  const at::Tensor input = torch::rand({1, 3, 64, 64});
  const auto a = eval_outputs(built.model, input);
  check_equal(a, eval_outputs(loaded.model, input));

  // The same as .safetensors: weights and metadata, no extras.
  write_checkpoint(dir.path / "a.safetensors", checkpoint);
  LoadedModel from_safetensors = load_model((dir.path / "a.safetensors").string(), 80);
  CHECK(from_safetensors.class_count == 3);
  CHECK(from_safetensors.names == std::vector<std::string>{"cat", "dog", "bird"});
  CHECK(identify_model((dir.path / "a.safetensors").string()).family == "yolox");
  check_equal(a, eval_outputs(from_safetensors.model, input));
}

TEST_CASE("model= with a missing weights file is a model error naming where weights come from", "[checkpoint]") {
  const std::string message = message_of([] { load_model("LibreYOLO9s.pt", 80); });
  CHECK_THAT(message, Catch::Contains("LibreYOLO9s.pt: weights file not found"));
  CHECK_THAT(message, Catch::Contains("weights/LibreYOLO9s.pt"));
  CHECK_THAT(message, Catch::Contains("huggingface.co/LibreYOLO"));
  CHECK_THAT(message, Catch::Contains("model=yolo9-s"));
}

TEST_CASE("The torch.save reader refuses globals it does not know and tensors outside storage", "[checkpoint]") {
  TempDir dir;
  // {'model': os.system('true')}: never run, refused by name.
  write_archive(dir.path / "evil.pt", "\x80\x02}X\x05\x00\x00\x00modelcos\nsystem\nX\x04\x00\x00\x00true\x85Rs."s);
  CHECK_THAT(message_of([&] { read_torch_file(dir.path / "evil.pt"); }), Catch::Contains("'os.system'"));

  // A float tensor of 4 elements on a storage of `numel` floats.
  const auto tensor4 = [](char numel) {
    return std::string("\x80\x02") + "ctorch._utils\n_rebuild_tensor_v2\n(" +
      "(X\x07\x00\x00\x00storage"s + "ctorch\nFloatStorage\n" + "X\x01\x00\x00\x00"s "0" + "X\x03\x00\x00\x00"s "cpu" +
      "K"s + numel + "tQ" + "K\x00"s + "K\x04\x85" + "K\x01\x85" + "\x89" + "ccollections\nOrderedDict\n)R" + "tR.";
  };
  write_archive(dir.path / "oob.pt", tensor4(2), std::string(8, '\0'));
  CHECK_THAT(message_of([&] { read_torch_file(dir.path / "oob.pt"); }), Catch::Contains("outside its storage"));

  // The same with a storage of 4 floats reads, and an OrderedDict with BUILD(_metadata) and
  // SETITEM reads as a dict.
  write_archive(dir.path / "ok.pt", tensor4(4), std::string(16, '\0'));
  CHECK(read_torch_file(dir.path / "ok.pt").toTensor().sizes() == at::IntArrayRef({4}));
  const std::string ordered = std::string("\x80\x02") + "ccollections\nOrderedDict\n)R" + "X\x01\x00\x00\x00"s "a" + "K\x05" +
                              "s" + "}X\x09\x00\x00\x00_metadata}sb."s;
  write_archive(dir.path / "ordered.pt", ordered);
  const auto dict = read_torch_file(dir.path / "ordered.pt").toGenericDict();
  CHECK(dict.at("a").toInt() == 5);

  std::ofstream(dir.path / "text.pt") << "not a zip";
  CHECK_THAT(message_of([&] { read_torch_file(dir.path / "text.pt"); }), Catch::Contains("not a readable torch.save file"));
  // a file cut short (an interrupted copy): said as such, without miniz's own text
  std::ifstream whole(dir.path / "ordered.pt", std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(whole)), std::istreambuf_iterator<char>());
  for (const std::size_t keep : {bytes.size() / 2, bytes.size() - 3}) {
    std::ofstream(dir.path / "cut.pt", std::ios::binary) << bytes.substr(0, keep);
    const std::string message = message_of([&] { read_torch_file(dir.path / "cut.pt"); });
    INFO(message);
    CHECK_THAT(message, Catch::Contains("the file is cut short") && Catch::Contains("interrupted save or copy"));
    CHECK_THAT(message, !Catch::Contains("miniz"));
  }
}

TEST_CASE("YOLOv9 checkpoints load at the class-tower width they hold, without the PGI branch", "[checkpoint]") {
  TempDir dir;
  // As LibreYOLO trains a named YOLOv9-t for 4 classes: COCO-width (80) class towers, PGI attached.
  LoadedModel named = load_model("yolo9-t", 4);
  CHECK(named.class_hidden == 80);
  named.model.enable_branch();
  Checkpoint checkpoint;
  checkpoint.family = "yolo9";
  checkpoint.size = "t";
  checkpoint.class_count = 4;
  checkpoint.names = {"a", "b", "c", "d"};
  checkpoint.image_size = 192;
  checkpoint.model = state_dict(*named.model.module);
  const auto has_aux = [](const NamedTensors& tensors) {
    return std::any_of(tensors.begin(), tensors.end(), [](const auto& item) { return yolo9::is_aux_tensor(item.first); });
  };
  REQUIRE(has_aux(checkpoint.model));
  write_checkpoint(dir.path / "v9.pt", checkpoint);
  LoadedModel loaded = load_model((dir.path / "v9.pt").string(), 80);
  CHECK(loaded.class_hidden == 80);
  CHECK_FALSE(has_aux(state_dict(*loaded.model.module)));
  const at::Tensor input = torch::rand({1, 3, 64, 64});
  check_equal(eval_outputs(named.model, input), eval_outputs(loaded.model, input));

  // A checkpoint from the head formula (max(ch0, min(nc, 100)) = 64 here) keeps its width.
  checkpoint.model = state_dict(*build_model(parse_model_name("yolo9-t"), 4).module);
  write_checkpoint(dir.path / "v9_formula.pt", checkpoint);
  CHECK(load_model((dir.path / "v9_formula.pt").string(), 80).class_hidden == 64);
}

TEST_CASE("A checkpoint whose weights hold NaN or infinity is refused, naming the file and the tensor", "[checkpoint]") {
  TempDir dir;
  LoadedModel built = load_model("yolox-n", 3);
  Checkpoint checkpoint = yolox_n_checkpoint(built);
  write_checkpoint(dir.path / "good.pt", checkpoint);
  CHECK_NOTHROW(read_checkpoint(dir.path / "good.pt"));
  NamedTensors raw;
  for (const auto& [name, tensor] : checkpoint.model) raw.emplace_back(name, tensor.clone());
  const auto poison = [](NamedTensors& tensors, std::size_t skip, double value) {  // the skip-th floating tensor
    for (auto& [name, tensor] : tensors) {
      if (!tensor.is_floating_point() || skip-- > 0) continue;
      tensor = tensor.clone();
      tensor.view(-1)[0] = value;
      return name;
    }
    return std::string();
  };
  for (const char* extension : {".pt", ".safetensors"}) {  // the EMA weights (`model`), in both formats
    Checkpoint bad = checkpoint;
    const std::string name = poison(bad.model, 5, std::nan(""));
    const fs::path path = dir.path / (std::string("nan") + extension);
    write_checkpoint(path, bad);
    try {
      read_checkpoint(path);
      FAIL("a NaN weight was read");
    } catch (const ModelError& error) {
      const std::string what = error.what();
      INFO(what);
      CHECK(what.find(path.string()) != std::string::npos);
      CHECK(what.find(name) != std::string::npos);
      CHECK(what.find("NaN or infinite") != std::string::npos);
    }
  }
  Checkpoint bad = checkpoint;  // the raw weights a resume trains on, an infinity
  const std::string name = poison(raw, 2, INFINITY);
  bad.set_extra("train_model", tensor_dict(raw));
  write_checkpoint(dir.path / "inf.pt", bad);
  CHECK_THROWS_WITH(read_checkpoint(dir.path / "inf.pt"), Catch::Matchers::Contains("tensor " + name + " holds NaN"));
}

TEST_CASE("A checkpoint whose optimizer state holds NaN or infinity is refused, naming the state", "[checkpoint]") {
  TempDir dir;
  LoadedModel built = load_model("yolox-n", 3);
  const auto with_optimizer = [&](double lr, const at::Tensor& buffer) {  // a momentum SGD's state, as torch writes it
    Checkpoint checkpoint = yolox_n_checkpoint(built);
    c10::impl::GenericDict state(c10::AnyType::get(), c10::AnyType::get());
    for (std::int64_t i : {0, 17}) {
      c10::impl::GenericDict entry(c10::StringType::get(), c10::AnyType::get());
      entry.insert("momentum_buffer", i == 17 ? buffer : at::zeros({4}));
      state.insert(i, entry);
    }
    c10::impl::GenericDict group(c10::StringType::get(), c10::AnyType::get());
    group.insert("lr", lr);
    group.insert("momentum", 0.9);
    c10::impl::GenericList groups(c10::AnyType::get());
    groups.push_back(group);
    c10::impl::GenericDict optimizer(c10::StringType::get(), c10::AnyType::get());
    optimizer.insert("state", state);
    optimizer.insert("param_groups", groups);
    checkpoint.set_extra("optimizer", optimizer);
    return checkpoint;
  };
  write_checkpoint(dir.path / "good.pt", with_optimizer(0.01, at::ones({4})));
  CHECK_NOTHROW(read_checkpoint(dir.path / "good.pt"));
  at::Tensor poisoned = at::ones({4});
  poisoned[2] = std::nan("");
  write_checkpoint(dir.path / "nan.pt", with_optimizer(0.01, poisoned));
  CHECK_THROWS_WITH(read_checkpoint(dir.path / "nan.pt"),
                    Catch::Matchers::Contains((dir.path / "nan.pt").string()) &&
                        Catch::Matchers::Contains("the optimizer's state[17].momentum_buffer holds NaN or infinite values"));
  write_checkpoint(dir.path / "lr.pt", with_optimizer(INFINITY, at::ones({4})));
  CHECK_THROWS_WITH(read_checkpoint(dir.path / "lr.pt"), Catch::Matchers::Contains("the optimizer's param_groups[0].lr holds NaN"));
}

TEST_CASE("A checkpoint's config holds LibreYOLO's types, and reads back from them and from the strings of before",
          "[checkpoint]") {
  const std::vector<std::string> arguments{"model=yolo9-t", "data=coco8", "epochs=80", "lr0=5e-4", "single_cls=false",
                                           "imgsz=320", "mosaic_scale=(0.5,1.5)"};
  const config::Config config = parse_arguments(config::command_train, arguments);
  const auto dict = train::checkpoint_config(config).toGenericDict();
  // bool(config.get("single_cls")) in LibreYOLO's validator: a string 'false' would be true
  CHECK(dict.at("single_cls").isBool());
  CHECK_FALSE(dict.at("single_cls").toBool());
  CHECK(dict.at("epochs").isInt());
  CHECK(dict.at("epochs").toInt() == 80);
  CHECK(dict.at("lr0").isDouble());
  CHECK(dict.at("lr0").toDouble() == 5e-4);
  CHECK(dict.at("warmup_epochs").isInt());  // a whole number: LibreYOLO's int (its TrainConfig declares it so)
  CHECK(dict.at("imgsz").isInt());
  CHECK(dict.at("imgsz").toInt() == 320);
  REQUIRE(dict.at("mosaic_scale").isList());
  CHECK(dict.at("mosaic_scale").toListRef()[1].toDouble() == 1.5);
  CHECK(dict.at("data").toStringRef() == "coco8");
  CHECK(dict.at("optimizer").isString());
  CHECK(dict.at("cache").isBool());   // cache=false: LibreYOLO's False
  CHECK(dict.at("resume").isBool());  // resume=false
  REQUIRE(dict.contains("eval_max_det"));
  CHECK(dict.at("eval_max_det").isNone());  // unset: None
  for (const auto& entry : dict) {  // nothing is left as text that is not text
    if (!entry.value().isString()) continue;
    const std::string& text = entry.value().toStringRef();
    INFO(entry.key().toStringRef() << " = " << text);
    CHECK((text != "true" && text != "false" && text != "none"));
  }

  Checkpoint typed;
  typed.set_extra("config", train::checkpoint_config(config));
  Checkpoint strings;  // what our checkpoints held before: every value a string
  c10::impl::GenericDict old(c10::StringType::get(), c10::AnyType::get());
  old.insert("single_cls", std::string("false"));
  old.insert("epochs", std::string("80"));
  old.insert("data", std::string("coco8"));
  old.insert("mosaic_scale", std::string("[0.5, 1.5]"));
  strings.set_extra("config", old);
  const auto a = saved_training_config(typed), b = saved_training_config(strings);
  for (const char* key : {"single_cls", "epochs", "data"}) {
    INFO(key);
    CHECK(a.at(key) == b.at(key));
  }
  CHECK(a.at("single_cls") == "false");
  CHECK(a.at("mosaic_scale") == "(0.5,1.5)");
  CHECK(saved_training_config(Checkpoint{}).empty());
}
