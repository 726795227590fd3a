// The classifier networks in libreyolo 1.6.0's state-dict names, counted as the issue states them
// (torchvision's and timm's counts for the same networks).
#include "core/error.h"
#include "eval/classify_metrics.h"
#include "models/mobilenetv4/model.h"
#include "models/resnet/model.h"

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <string>

#include "catch.h"  // last: see catch.h

using namespace libreyolo;

namespace {

std::int64_t parameter_count(const torch::nn::Module& module) {
  std::int64_t count = 0;
  for (const auto& p : module.parameters()) count += p.numel();
  return count;
}

std::map<std::string, std::vector<std::int64_t>> shapes(const torch::nn::Module& module) {
  std::map<std::string, std::vector<std::int64_t>> out;
  for (const auto& item : module.named_parameters()) out[item.key()] = item.value().sizes().vec();
  for (const auto& item : module.named_buffers()) out[item.key()] = item.value().sizes().vec();
  return out;
}

}  // namespace

TEST_CASE("ResNet: parameter counts, state-dict names and logits", "[classifier]") {
  CHECK(parameter_count(*models::resnet::Model("18", 1000)) == 11'689'512);
  CHECK(parameter_count(*models::resnet::Model("18", 10)) == 11'181'642);
  CHECK(parameter_count(*models::resnet::Model("34", 1000)) == 21'797'672);
  CHECK(parameter_count(*models::resnet::Model("50", 1000)) == 25'557'032);
  CHECK(parameter_count(*models::resnet::Model("101", 1000)) == 44'549'160);

  const auto r18 = shapes(*models::resnet::Model("18", 10));
  CHECK(r18.at("conv1.weight") == std::vector<std::int64_t>{64, 3, 7, 7});
  CHECK(r18.at("layer1.0.conv1.weight") == std::vector<std::int64_t>{64, 64, 3, 3});
  CHECK(r18.count("layer1.0.downsample.0.weight") == 0);
  CHECK(r18.at("layer2.0.downsample.0.weight") == std::vector<std::int64_t>{128, 64, 1, 1});
  CHECK(r18.at("layer2.0.downsample.1.running_var") == std::vector<std::int64_t>{128});
  CHECK(r18.count("bn1.num_batches_tracked") == 1);
  CHECK(r18.at("fc.weight") == std::vector<std::int64_t>{10, 512});
  const auto r50 = shapes(*models::resnet::Model("50", 10));
  CHECK(r50.at("layer1.0.conv3.weight") == std::vector<std::int64_t>{256, 64, 1, 1});
  CHECK(r50.at("layer1.0.downsample.0.weight") == std::vector<std::int64_t>{256, 64, 1, 1});
  CHECK(r50.at("layer2.0.conv2.weight") == std::vector<std::int64_t>{128, 128, 3, 3});  // v1.5: the stride's 3x3
  CHECK(r50.at("fc.weight") == std::vector<std::int64_t>{10, 2048});

  models::resnet::Model net("18", 7);
  net->eval();
  const at::Tensor logits = net->forward(at::randn({2, 3, 64, 64}));
  CHECK(logits.sizes() == at::IntArrayRef{2, 7});
  CHECK_THROWS_AS(models::resnet::Model("19", 10), ModelError);
}

TEST_CASE("MobileNetV4: parameter counts, state-dict names, channel rounding and logits", "[classifier]") {
  using models::mobilenetv4::make_divisible;
  CHECK(make_divisible(64 * 3.0) == 192);
  CHECK(make_divisible(3.0) == 8);      // at least the divisor
  CHECK(make_divisible(20.0) == 24);    // int(20 + 4) // 8 * 8 = 24
  CHECK(make_divisible(11.0) == 16);    // 8 would be below 0.9 v

  CHECK(parameter_count(*models::mobilenetv4::Model("s", 1000)) == 3'774'024);
  CHECK(parameter_count(*models::mobilenetv4::Model("s", 10)) == 2'505'834);

  const auto s = shapes(*models::mobilenetv4::Model("s", 10));
  CHECK(s.at("conv_stem.weight") == std::vector<std::int64_t>{32, 3, 3, 3});
  CHECK(s.at("blocks.0.0.conv.weight") == std::vector<std::int64_t>{32, 32, 3, 3});
  CHECK(s.at("blocks.0.0.bn1.running_mean") == std::vector<std::int64_t>{32});
  CHECK(s.at("blocks.2.0.dw_start.conv.weight") == std::vector<std::int64_t>{64, 1, 5, 5});
  CHECK(s.at("blocks.2.0.pw_exp.conv.weight") == std::vector<std::int64_t>{192, 64, 1, 1});
  CHECK(s.at("blocks.2.0.dw_mid.conv.weight") == std::vector<std::int64_t>{192, 1, 5, 5});
  CHECK(s.at("blocks.2.0.pw_proj.bn.weight") == std::vector<std::int64_t>{96});
  CHECK(s.count("blocks.2.1.dw_start.conv.weight") == 0);  // a0: no start depthwise
  CHECK(s.count("blocks.2.5.dw_mid.conv.weight") == 0);    // k0: no middle depthwise
  CHECK(s.at("blocks.4.0.conv.weight") == std::vector<std::int64_t>{960, 128, 1, 1});
  CHECK(s.at("conv_head.weight") == std::vector<std::int64_t>{1280, 960, 1, 1});
  CHECK(s.at("norm_head.running_var") == std::vector<std::int64_t>{1280});
  CHECK(s.at("classifier.weight") == std::vector<std::int64_t>{10, 1280});
  const auto m = shapes(*models::mobilenetv4::Model("m", 10));
  CHECK(m.at("blocks.0.0.conv_exp.weight") == std::vector<std::int64_t>{128, 32, 3, 3});
  CHECK(m.at("blocks.0.0.conv_pwl.weight") == std::vector<std::int64_t>{48, 128, 1, 1});
  CHECK(m.count("blocks.3.10.pw_proj.conv.weight") == 1);  // stage 3: 11 blocks
  CHECK(m.count("blocks.3.11.pw_proj.conv.weight") == 0);
  const auto l = shapes(*models::mobilenetv4::Model("l", 10));
  CHECK(l.at("conv_stem.weight") == std::vector<std::int64_t>{24, 3, 3, 3});
  CHECK(l.at("blocks.3.0.dw_start.conv.weight") == std::vector<std::int64_t>{192, 1, 5, 5});
  CHECK(l.at("blocks.4.0.conv.weight") == std::vector<std::int64_t>{960, 512, 1, 1});

  models::mobilenetv4::Model net("s", 5);
  net->eval();
  const at::Tensor input = at::randn({2, 3, 224, 224});
  CHECK(net->features(input).sizes() == at::IntArrayRef{2, 960, 7, 7});
  CHECK(net->forward(input).sizes() == at::IntArrayRef{2, 5});
  CHECK_THROWS_AS(models::mobilenetv4::Model("xl", 10), ModelError);
}

TEST_CASE("Classification metrics: hand-counted top-1/top-k and macro P/R/F1 over present classes; bad labels refused",
          "[classifier]") {
  eval::ClassifyMetrics metrics(4);
  CHECK(metrics.top1() == 0);
  CHECK(metrics.macro().f1 == 0);
  // predictions (top-1): 0, 1, 1, 3; targets: 0, 1, 2, 1. Class 3 never a target: out of the mean.
  const at::Tensor logits = at::tensor(std::vector<float>{9, 1, 0, 0, /**/ 0, 9, 1, 0, /**/ 0, 9, 5, 0, /**/ 0, 1, 0, 9}).reshape({4, 4});
  metrics.update(logits, at::tensor(std::vector<std::int64_t>{0, 1, 2, 1}));
  CHECK(metrics.top_k() == 4);
  CHECK(metrics.top1() == 0.5);
  CHECK(metrics.top5() == 1.0);
  // class 0: P 1, R 1; class 1: P 1/2, R 1/2; class 2: P 0 (never predicted), R 0
  const auto macro = metrics.macro();
  CHECK(macro.precision == Approx(0.5));
  CHECK(macro.recall == Approx(0.5));
  CHECK(macro.f1 == Approx(0.5));
  try {
    metrics.update(logits, at::tensor(std::vector<std::int64_t>{0, 4, -1, 1}));
    FAIL("accepted labels outside the model's classes");
  } catch (const DataError& error) {
    CHECK_THAT(error.what(), Catch::Contains("[-1, 4]") && Catch::Contains("4-class model"));
  }
}
