#include "core/error.h"
#include "models/family.h"
#include "models/model.h"
#include "models/safetensors.h"

#include <cmath>
#include <map>

#include <fmt/format.h>

#include "catch.h"  // last: see catch.h

using namespace libreyolo::models;

TEST_CASE("GFLOPs are within 3 % of the published figures", "[registry]") {
  // (name, image size, published GFLOPs, fused?): the YOLOv9 paper and the YOLOv5 README count the fused
  // (deployed) model; the YOLOX README profiles the model as built, BatchNorms included.
  const std::vector<std::tuple<std::string, int, double, bool>> published = {
      {"yolo9-t", 640, 7.7, true}, {"yolo9-s", 640, 26.4, true}, {"yolox-n", 416, 1.08, false},
      {"yolox-t", 416, 6.45, false}, {"yolox-s", 640, 26.8, false}, {"yolov5n", 640, 4.5, true}, {"yolov5s", 640, 16.5, true},
      {"rtmdet-t", 640, 16.2, false},  // mmdetection's RTMDet README: 8.1 G multiply-adds
      {"yolo7-b", 640, 104.7, true}};  // the YOLOv7 paper's YOLOv7 (its RepConv deployed as one conv)
  for (const auto& [name, size, gflops, fused] : published) {
    Model model = build_model(parse_model_name(name), 80);
    if (fused) model.fuse();
    const ModelSummary summary = summarize(model, size, size);
    INFO(name << ": " << summary.gflops << " GFLOPs, published " << gflops);
    CHECK(std::abs(summary.gflops / gflops - 1) < 0.03);
    CHECK(summary.parameters == summary.gradients);
  }
}

TEST_CASE("YOLOv5's sizes have yolov5 7.0's parameter counts and outputs", "[registry]") {
  // yolov5{n,s,m,l,x}.yaml at nc 80, as its parse_model builds them
  const std::vector<std::pair<std::string, std::int64_t>> counts = {
      {"yolov5n", 1872157}, {"yolov5s", 7235389}, {"yolov5m", 21190557}, {"yolov5l", 46563709}, {"yolov5x", 86749405}};
  for (const auto& [name, parameters] : counts) {
    INFO(name);
    CHECK(summarize(build_model(parse_model_name(name), 80), 64, 64).parameters == parameters);
  }
  Model model = build_model(parse_model_name("yolov5n"), 3);
  model.module->eval();
  const auto maps = model.forward(at::zeros({2, 3, 64, 96}));
  REQUIRE(maps.size() == 4);  // three levels, then the anchors
  CHECK(maps[0].sizes() == c10::IntArrayRef{2, 24, 8, 12});
  CHECK(maps[2].sizes() == c10::IntArrayRef{2, 24, 2, 3});
  CHECK(maps[3].sizes() == c10::IntArrayRef{3, 3, 2});
  CHECK(maps[3][0][0][0].item<float>() == Approx(10.0 / 8));  // (10, 13) px at stride 8, in grid units
  CHECK(maps[3][2][2][1].item<float>() == Approx(326.0 / 32));
}

TEST_CASE("YOLOv7-b has libreyolo 1.6.0's parameter count and three maps of three anchors", "[registry]") {
  // YOLOv7Model(num_classes=80) and (1): 37,622,682 and 37,196,556 parameters
  CHECK(summarize(build_model(parse_model_name("yolo7-b"), 80), 64, 64).parameters == 37622682);
  Model model = build_model(parse_model_name("yolo7b"), 1);
  CHECK(summarize(model, 64, 64).parameters == 37196556);
  CHECK(model.default_image_size == 640);
  model.module->eval();
  const auto maps = model.forward(at::zeros({1, 3, 64, 96}));
  REQUIRE(maps.size() == 3);
  CHECK(maps[0].sizes() == c10::IntArrayRef{1, 18, 8, 12});
  CHECK(maps[2].sizes() == c10::IntArrayRef{1, 18, 2, 3});
  CHECK_THROWS_AS(build_model(ModelName{"yolo7", "t", false}, 80), libreyolo::ModelError);
}

TEST_CASE("RTMDet's sizes have libreyolo 1.6.0's parameter counts, the shared convolutions once", "[registry]") {
  // LibreRTMDetModel(size, nc) named_parameters (which counts a shared tensor once), nc 80 and 1
  const std::vector<std::tuple<std::string, std::int64_t, std::int64_t>> counts = {
      {"rtmdet-t", 4896168, 4873179}, {"rtmdet-s", 8886924, 8856351}, {"rtmdet-m", 24709188, 24663447},
      {"rtmdet-l", 52315804, 52254895}, {"rtmdet-x", 94855572, 94779495}};
  for (const auto& [name, at80, at1] : counts) {
    INFO(name);
    CHECK(summarize(build_model(parse_model_name(name), 80), 64, 64).parameters == at80);
    CHECK(summarize(build_model(parse_model_name(name), 1), 64, 64).parameters == at1);
  }
  Model model = build_model(parse_model_name("rtmdet-t"), 3);
  model.module->eval();
  const auto maps = model.forward(at::zeros({1, 3, 64, 96}));
  REQUIRE(maps.size() == 3);
  CHECK(maps[0].sizes() == c10::IntArrayRef{1, 7, 8, 12});  // 4 distances + 3 classes
  CHECK(maps[2].sizes() == c10::IntArrayRef{1, 7, 2, 3});
}

TEST_CASE("RTMDet reads LibreYOLO's repeated shared convolutions and refuses copies that differ", "[registry]") {
  Model model = build_model(parse_model_name("rtmdet-t"), 3);
  const NamedTensors ours = state_dict(*model.module);
  std::map<std::string, at::Tensor> tensors(ours.begin(), ours.end());
  CHECK(tensors.count("head.cls_convs.0.1.conv.weight") == 1);
  CHECK(tensors.count("head.cls_convs.2.1.conv.weight") == 0);  // shared: stored once
  CHECK(tensors.count("head.cls_convs.2.1.bn.weight") == 1);    // each level's own BatchNorm
  auto theirs = tensors;
  for (const char* tower : {"cls", "reg"}) {
    for (int level : {1, 2}) {
      for (int i : {0, 1}) theirs[fmt::format("head.{}_convs.{}.{}.conv.weight", tower, level, i)] = tensors.at(fmt::format("head.{}_convs.0.{}.conv.weight", tower, i)).clone();
    }
  }
  auto read = theirs;
  family("rtmdet").normalise_tensors(read);
  CHECK(read.size() == tensors.size());
  CHECK_NOTHROW(load_state_dict(*model.module, read, /*strict=*/true));
  theirs["head.reg_convs.2.0.conv.weight"] += 1;
  CHECK_THROWS_AS(family("rtmdet").normalise_tensors(theirs), libreyolo::ModelError);
}

TEST_CASE("FLOPs are counted once per convolution, with bias and BatchNorm as thop does", "[registry]") {
  // one 3x3 conv, 8 -> 16 channels, on 32x32: 2 * 16*32*32 * 8*9 FLOPs
  const auto weight = at::randn({16, 8, 3, 3});
  const auto bias = at::randn({16});
  const auto input = at::randn({1, 8, 32, 32});
  const double outputs = 16.0 * 32 * 32;
  CHECK(model_gflops([&] { at::conv2d(input, weight, {}, 1, 1); }) * 1e9 == Approx(2.0 * outputs * 8 * 9));
  CHECK(model_gflops([&] { at::conv2d(input, weight, bias, 1, 1); }) * 1e9 == Approx(2.0 * outputs * (8 * 9 + 1)));
  const auto mean = at::zeros({8}), variance = at::ones({8});
  CHECK(model_gflops([&] { at::batch_norm(input, {}, {}, mean, variance, false, 0.1, 1e-3, false); }) * 1e9 ==
        Approx(2.0 * 2 * 8 * 32 * 32));
}

TEST_CASE("build_model refuses what it cannot build", "[registry]") {
  CHECK_THROWS_AS(build_model(parse_model_name("runs/exp/weights/best.pt"), 80), libreyolo::ModelError);
  CHECK(build_model(parse_model_name("yolox-n"), 3).default_image_size == 416);
}

TEST_CASE("to_channels_last keeps the network's outputs and gradients", "[registry]") {
  for (const char* name : {"yolo9-t", "yolox-n", "yolov5n", "yolo7-b", "rtmdet-t"}) {
    INFO(name);
    Model plain = build_model(parse_model_name(name), 3);
    Model nhwc = build_model(parse_model_name(name), 3);
    {
      at::NoGradGuard no_grad;
      const auto source = plain.module->named_parameters();
      for (auto& item : nhwc.module->named_parameters()) item.value().copy_(source[item.key()]);
    }
    plain.module->to(at::kDouble);
    nhwc.module->to(at::kDouble);
    to_channels_last(*nhwc.module);
    std::int64_t converted = 0;
    for (const auto& p : nhwc.module->parameters()) {
      if (p.dim() == 4) {
        CHECK(p.is_contiguous(at::MemoryFormat::ChannelsLast));
        ++converted;
      }
    }
    CHECK(converted > 50);
    plain.module->train();
    nhwc.module->train();
    const auto x = at::rand({2, 3, 64, 64}, at::kDouble);
    const auto a = plain.forward(x);
    const auto b = nhwc.forward(x.contiguous(at::MemoryFormat::ChannelsLast));
    REQUIRE(a.size() == b.size());
    at::Tensor la = at::zeros({}), lb = at::zeros({});
    for (std::size_t i = 0; i < a.size(); ++i) {
      // float64, so that only the order of the sums differs: float32 through a deep train-mode
      // network on a batch of 2 amplifies that to ~1% of the early layers' gradients.
      const double scale = 1 + a[i].abs().max().item<double>();
      CHECK((a[i] - b[i]).abs().max().item<double>() < 1e-9 * scale);
      la = la + a[i].square().mean();
      lb = lb + b[i].square().mean();
    }
    la.backward();
    lb.backward();
    const auto grads = plain.module->named_parameters();
    for (const auto& item : nhwc.module->named_parameters()) {
      const auto& g = grads[item.key()].grad();
      INFO(item.key());
      CHECK((item.value().grad() - g).abs().max().item<double>() < 1e-7 * (1 + g.abs().max().item<double>()));
    }
  }
}

TEST_CASE("to_channels_last keeps float32 eval outputs within float32 rounding", "[registry]") {
  // The layout training runs in: float32, where the CPU's channels-last kernels (oneDNN's, our
  // BatchNorm-SiLU) sum in another order than the contiguous ones. Eval mode, so BatchNorm's batch
  // statistics do not amplify the rounding; the bound is float32's, relative to the output's range.
  for (const char* name : {"yolo9-t", "yolox-n", "yolov5n", "yolo7-b", "rtmdet-t"}) {
    INFO(name);
    at::manual_seed(3);
    Model plain = build_model(parse_model_name(name), 3);
    Model nhwc = build_model(parse_model_name(name), 3);
    {
      at::NoGradGuard no_grad;
      const auto source = plain.module->named_parameters();
      for (auto& item : nhwc.module->named_parameters()) item.value().copy_(source[item.key()]);
      const auto buffers = plain.module->named_buffers();
      for (auto& item : nhwc.module->named_buffers()) item.value().copy_(buffers[item.key()]);
    }
    to_channels_last(*nhwc.module);
    plain.module->eval();
    nhwc.module->eval();
    at::NoGradGuard no_grad;
    const auto x = at::rand({2, 3, 96, 96});
    const auto a = plain.forward(x);
    const auto b = nhwc.forward(x.contiguous(at::MemoryFormat::ChannelsLast));
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      REQUIRE(at::isfinite(b[i]).all().item<bool>());
      const double scale = 1 + a[i].abs().max().item<double>();
      CHECK((a[i] - b[i]).abs().max().item<double>() < 1e-4 * scale);
    }
  }
}

TEST_CASE("each family validates and predicts in the geometry it trains in", "[registry]") {
  // YOLOX's pipeline (YOLOX, YOLOv7, RTMDet) places an image without mosaic in the top-left corner,
  // as LibreYOLO validates them; YOLOv9 and YOLOv5 train and validate Ultralytics' centred letterbox.
  for (const char* name : {"yolox", "yolo7", "rtmdet"}) {
    INFO(name);
    CHECK(family(name).sample_pipeline()->name() == "yolox mosaic-mixup");
    CHECK(family(name).input_fit() == libreyolo::data::InputFit::letterbox_top_left);
  }
  for (const char* name : {"yolo9", "yolov5"}) {
    INFO(name);
    CHECK(family(name).input_fit() == libreyolo::data::InputFit::letterbox);
  }
}
