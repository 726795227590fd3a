#include "core/error.h"
#include "models/safetensors.h"
#include "models/yolox/model.h"

#include <ATen/ATen.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "catch.h"  // last: see catch.h

using namespace libreyolo;
using namespace libreyolo::models;
namespace fs = std::filesystem;

namespace {
fs::path temp(const std::string& name) { return fs::temp_directory_path() / (std::to_string(::getpid()) + "_" + name); }
}  // namespace

TEST_CASE("safetensors round trip keeps names, dtypes, shapes and values", "[safetensors]") {
  const auto path = temp("round.safetensors");
  const NamedTensors tensors = {{"a.weight", at::randn({3, 4, 2})},
                                {"b.count", at::tensor({7}, at::kLong).reshape({})},
                                {"c.half", at::randn({5}).to(at::kHalf)},
                                {"d.bytes", at::arange(0, 10, at::kByte)}};
  write_safetensors(path, tensors, {{"format", "pt"}});
  const auto loaded = read_safetensors(path);
  REQUIRE(loaded.size() == 4);
  for (const auto& [name, tensor] : tensors) {
    INFO(name);
    CHECK(loaded.at(name).scalar_type() == tensor.scalar_type());
    CHECK(loaded.at(name).sizes() == tensor.sizes());
    CHECK(at::equal(loaded.at(name), tensor));
  }
  fs::remove(path);
}

TEST_CASE("a model's state dict round-trips through safetensors", "[safetensors]") {
  const auto path = temp("yolox.safetensors");
  yolox::Model a("n", 5), b("n", 5);
  write_safetensors(path, state_dict(*a));
  load_state_dict(*b, read_safetensors(path));
  a->eval();
  b->eval();
  at::NoGradGuard no_grad;
  const auto input = at::rand({1, 3, 64, 64});
  const auto out_a = a->forward(input);
  const auto out_b = b->forward(input);
  for (std::size_t i = 0; i < out_a.size(); ++i) CHECK(at::equal(out_a[i], out_b[i]));
  fs::remove(path);
}

TEST_CASE("bad weights files and mismatched state dicts are model errors", "[safetensors]") {
  const auto garbage = temp("garbage.safetensors");
  std::ofstream(garbage) << "not a weights file at all";
  CHECK_THROWS_AS(read_safetensors(garbage), ModelError);
  CHECK_THROWS_AS(read_safetensors(temp("absent.safetensors")), ModelError);

  const auto path = temp("n80.safetensors");
  yolox::Model n80("n", 80), n5("n", 5), t80("t", 80);
  write_safetensors(path, state_dict(*n80));
  const auto tensors = read_safetensors(path);
  try {
    load_state_dict(*n5, tensors);
    FAIL("expected a shape mismatch");
  } catch (const ModelError& error) {
    CHECK(std::string(error.what()).find("head.cls_preds.0.weight") != std::string::npos);
  }
  CHECK_THROWS_AS(load_state_dict(*t80, tensors), ModelError);  // tiny is not depthwise: other names
  fs::remove(garbage);
  fs::remove(path);
}

TEST_CASE("a BatchNorm's num_batches_tracked may be absent from a strict load, as PyTorch allows", "[safetensors]") {
  torch::nn::Sequential net(torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 4, 1)), torch::nn::BatchNorm2d(4));
  std::map<std::string, at::Tensor> tensors;
  for (const auto& [name, tensor] : state_dict(*net)) tensors[name] = at::full_like(tensor, 3);
  tensors.erase("1.num_batches_tracked");  // a frozen norm's state dict (LibreYOLO's r50 and up from weights)
  load_state_dict(*net, tensors);           // strict
  CHECK(net[1]->as<torch::nn::BatchNorm2dImpl>()->running_var.eq(3).all().item<bool>());
  CHECK(net[1]->as<torch::nn::BatchNorm2dImpl>()->num_batches_tracked.item<std::int64_t>() == 0);  // kept
  tensors.erase("1.running_var");  // any other buffer is still required
  try {
    load_state_dict(*net, tensors);
    FAIL("expected a missing tensor");
  } catch (const ModelError& error) {
    CHECK(std::string(error.what()).find("1 missing (1.running_var)") != std::string::npos);
  }
}
