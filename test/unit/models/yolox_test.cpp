#include "core/error.h"
#include "models/yolox/model.h"

#include <torch/torch.h>
#include "test_util.h"

#include "catch.h"  // last: see catch.h

using namespace libreyolo::models;

using test_util::parameter_count;

TEST_CASE("YOLOX parameter counts are exact at nc=80", "[yolox]") {
  // README figures: nano 0.91 M, tiny 5.06 M, s 9.0 M, m 25.3 M, l 54.2 M (exact values computed
  // from the layer definitions).
  const std::vector<std::pair<std::string, std::int64_t>> expected = {
      {"n", 912159}, {"t", 5055855}, {"s", 8968255}, {"m", 25326495}, {"l", 54208895}};
  for (const auto& [size, count] : expected) {
    yolox::Model model(size, 80);
    INFO("yolox-" << size);
    CHECK(parameter_count(*model) == count);
  }
}

TEST_CASE("YOLOX outputs one map per stride with box, objectness and classes", "[yolox]") {
  yolox::Model model("n", 3);
  model->eval();
  torch::NoGradGuard no_grad;
  const auto outputs = model->forward(torch::rand({2, 3, 64, 96}));
  REQUIRE(outputs.size() == 3);
  CHECK(outputs[0].sizes() == torch::IntArrayRef({2, 8, 8, 12}));
  CHECK(outputs[2].sizes() == torch::IntArrayRef({2, 8, 2, 3}));
  // eval: objectness and classes are probabilities
  const auto scores = outputs[0].slice(1, 4);
  CHECK(scores.min().item<float>() >= 0.0f);
  CHECK(scores.max().item<float>() <= 1.0f);
  // the prior bias: every objectness starts near 0.01
  CHECK(outputs[0].select(1, 4).mean().item<float>() == Approx(0.01).margin(0.01));
}

TEST_CASE("YOLOX state dict uses the official names; BatchNorm eps 1e-3, momentum 0.03", "[yolox]") {
  yolox::Model model("n", 80);
  const auto names = model->named_parameters().keys();
  const auto has = [&](const std::string& key) { return std::find(names.begin(), names.end(), key) != names.end(); };
  CHECK(has("backbone.backbone.stem.conv.conv.weight"));
  CHECK(has("backbone.backbone.dark3.1.m.2.conv2.dconv.conv.weight"));
  CHECK(has("backbone.backbone.dark5.1.conv2.bn.weight"));
  CHECK(has("backbone.C3_p4.m.0.conv2.pconv.bn.bias"));
  CHECK(has("backbone.bu_conv2.dconv.conv.weight"));
  CHECK(has("head.cls_convs.2.1.pconv.conv.weight"));
  CHECK(has("head.obj_preds.0.bias"));
  const auto buffers = model->named_buffers().keys();
  CHECK(std::find(buffers.begin(), buffers.end(), "head.stems.0.bn.num_batches_tracked") != buffers.end());
  for (const auto& module : model->modules(false)) {
    if (const auto* bn = module->as<torch::nn::BatchNorm2d>()) {
      CHECK(bn->options.eps() == Approx(1e-3));
      CHECK(bn->options.momentum().value() == Approx(0.03));
    }
  }
  CHECK_THROWS_AS(yolox::Model("q", 80), libreyolo::ModelError);
}
