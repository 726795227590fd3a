// CUDA-graph training's logic on the CPU, through a fake backend that records warm-ups,
// captures, replays and resets, and replays by running the captured work again: graphed and
// eager training must then agree exactly, which proves the static buffers, the BatchNorm
// snapshot and the gradient ownership under accumulation; plus LibreYOLO's shape counting,
// gating, invalidation and fallback.
#include "core/config.h"
#include "data/synth.h"
#include "models/checkpoint.h"
#include "nn/conv.h"
#include "train/cuda_graph.h"
#include "train/trainer.h"

#include <ATen/ATen.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/optim/sgd.h>
#include <torch/utils.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <unistd.h>

#include "catch.h"  // last: see catch.h

using namespace libreyolo::train;

namespace {

// The library's re-running backend, counting its calls and failing on request.
struct FakeBackend final : RerunBackend {
  struct Log {
    int warmups = 0, captures = 0, replays = 0, resets = 0;
    bool fail_capture = false, fail_replay = false;
  };
  explicit FakeBackend(Log& log) : log_(log) {}
  void warm_up(const std::function<void()>& work) override {
    ++log_.warmups;
    RerunBackend::warm_up(work);
  }
  std::size_t capture(const std::function<void()>& work) override {
    if (log_.fail_capture) throw std::runtime_error("capture refused (injected)");
    ++log_.captures;
    return RerunBackend::capture(work);
  }
  void replay(std::size_t graph) override {
    if (log_.fail_replay) throw std::runtime_error("replay refused (injected)");
    ++log_.replays;
    RerunBackend::replay(graph);
  }
  void reset() override {
    ++log_.resets;
    RerunBackend::reset();
  }
  std::uint64_t pool_bytes() const override { return 4096; }

  Log& log_;
};

// Conv+BN+SiLU, then two heads: the shape of our detectors' outputs (a list of maps).
struct Net {
  torch::nn::Sequential body{nullptr};
  torch::nn::Conv2d head_a{nullptr}, head_b{nullptr};
  Net() {  // the same weights every time
    torch::manual_seed(3);
    body = torch::nn::Sequential(libreyolo::nn::BaseConv(3, 6, 3, 1), libreyolo::nn::BaseConv(6, 4, 3, 2));
    head_a = torch::nn::Conv2d(torch::nn::Conv2dOptions(4, 2, 1));
    head_b = torch::nn::Conv2d(torch::nn::Conv2dOptions(4, 3, 1));
  }
  std::vector<at::Tensor> forward(const at::Tensor& x) {
    const at::Tensor f = body->forward(x);
    return {head_a->forward(f), head_b->forward(f)};
  }
  std::vector<at::Tensor> parameters() {
    std::vector<at::Tensor> all = body->parameters();
    for (auto& p : head_a->parameters()) all.push_back(p);
    for (auto& p : head_b->parameters()) all.push_back(p);
    return all;
  }
  std::vector<at::Tensor> buffers() { return body->buffers(); }
  CaptureTensors capture_tensors() { return {.parameters = parameters(), .buffers = buffers()}; }
  void train() { body->train(); }
};

at::Tensor loss_of(const std::vector<at::Tensor>& outputs) { return outputs[0].square().mean() + 0.5 * outputs[1].abs().mean(); }

// `steps` micro-steps of SGD with an accumulation window of `accumulate`, zero_grad(set_to_none)
// at each window's start; batches of 4, or 3 for every `odd_every`-th (a last partial batch).
struct Trained {
  std::vector<at::Tensor> parameters, buffers;
  std::vector<double> losses;
};
Trained train(GraphManager* manager, int steps, int accumulate, int odd_every = 0) {
  Net net;
  net.train();
  torch::optim::SGD sgd(net.parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  Trained out;
  const NetworkFunction network = [&](const at::Tensor& x) { return net.forward(x); };
  for (int step = 0; step < steps; ++step) {
    torch::manual_seed(100 + static_cast<std::uint64_t>(step));
    const std::int64_t batch = odd_every > 0 && step % odd_every == odd_every - 1 ? 3 : 4;
    const at::Tensor x = at::randn({batch, 3, 16, 16});
    if (step % accumulate == 0) sgd.zero_grad(/*set_to_none=*/true);
    const auto outputs = manager ? manager->forward(x, network, [&] { return net.capture_tensors(); }) : network(x);
    const at::Tensor loss = loss_of(outputs) / accumulate;
    loss.backward();
    out.losses.push_back(loss.item<double>());
    if (step % accumulate == accumulate - 1) sgd.step();
  }
  for (auto& p : net.parameters()) out.parameters.push_back(p.detach().clone());
  for (auto& b : net.buffers()) out.buffers.push_back(b.detach().clone());
  return out;
}

void check_same(const Trained& a, const Trained& b) {
  REQUIRE(a.losses.size() == b.losses.size());
  for (std::size_t i = 0; i < a.losses.size(); ++i) CHECK(a.losses[i] == Approx(b.losses[i]).epsilon(1e-6));
  for (std::size_t i = 0; i < a.parameters.size(); ++i) CHECK(at::allclose(a.parameters[i], b.parameters[i], 1e-5, 1e-7));
  for (std::size_t i = 0; i < a.buffers.size(); ++i) {
    if (a.buffers[i].is_floating_point()) CHECK(at::allclose(a.buffers[i], b.buffers[i], 1e-5, 1e-7));
  }
}

}  // namespace

TEST_CASE("graphed training equals eager: static buffers, BatchNorm snapshot, gradients under accumulation", "[graph]") {
  for (const int accumulate : {1, 2, 3}) {
    FakeBackend::Log log;
    GraphManager manager(std::make_unique<FakeBackend>(log));
    const Trained eager = train(nullptr, 12, accumulate);
    const Trained graphed = train(&manager, 12, accumulate);
    INFO("accumulate=" << accumulate);
    check_same(eager, graphed);
    // captured on the 3rd batch of the shape, after 3 warm-ups; replayed from then on
    CHECK(manager.counts().eager == 2);
    CHECK(manager.counts().captures == 1);
    CHECK(manager.counts().replays == 10);
    CHECK(log.warmups == 3);
    CHECK(log.captures == 2);  // forward and backward
    CHECK(log.replays == 20);
  }
}

TEST_CASE("graphs: one shape captured per run, other shapes eager, the graph kept", "[graph]") {
  FakeBackend::Log log;
  GraphManager manager(std::make_unique<FakeBackend>(log));
  // every 4th batch has 3 images: shape A (4) reaches 3 first; shape B (3) stays eager
  const Trained graphed = train(&manager, 16, 2, 4);
  check_same(train(nullptr, 16, 2, 4), graphed);
  CHECK(manager.captured());
  CHECK(manager.counts().captures == 1);
  CHECK(manager.counts().eager_after_capture == 4);  // the four 3-image batches
  CHECK(manager.counts().eager == 2);
  CHECK(manager.counts().replays == 10);
}

TEST_CASE("graphs: a failed capture or replay turns the run eager for good, with the same results", "[graph]") {
  for (const bool at_replay : {false, true}) {
    FakeBackend::Log log;
    (at_replay ? log.fail_replay : log.fail_capture) = true;
    GraphManager manager(std::make_unique<FakeBackend>(log));
    const Trained graphed = train(&manager, 8, 2);
    check_same(train(nullptr, 8, 2), graphed);
    REQUIRE(manager.disabled());
    CHECK(manager.disabled_reason()->find(at_replay ? "first graph replay failed: replay refused" : "graph capture failed: capture refused") !=
          std::string::npos);
    CHECK(manager.counts().replays == 0);
    CHECK(manager.counts().eager == 8);
    CHECK(log.resets == 1);
  }
}

TEST_CASE("graphs: invalidate drops the graph and counts shapes again", "[graph]") {
  FakeBackend::Log log;
  GraphManager manager(std::make_unique<FakeBackend>(log));
  Net net;
  net.train();
  const NetworkFunction network = [&](const at::Tensor& x) { return net.forward(x); };
  const at::Tensor x = at::randn({2, 3, 16, 16});
  for (int i = 0; i < 3; ++i) loss_of(manager.forward(x, network, [&] { return net.capture_tensors(); })).backward();
  CHECK(manager.captured());
  manager.invalidate("YOLOX enabled the L1 branch");
  CHECK_FALSE(manager.captured());
  CHECK(log.resets == 1);
  for (int i = 0; i < 2; ++i) loss_of(manager.forward(x, network, [&] { return net.capture_tensors(); })).backward();
  CHECK_FALSE(manager.captured());  // the threshold applies again
  loss_of(manager.forward(x, network, [&] { return net.capture_tensors(); })).backward();
  CHECK(manager.captured());
  CHECK(manager.counts().captures == 2);
  CHECK(manager.pool_bytes() == 4096);
}

TEST_CASE("graphs: gating reasons", "[graph]") {
  GraphGateInputs in;
  CHECK(*graph_gate_reason(in) == "device is not CUDA");
  in.cuda_device = true;
  in.backend_missing_reason = "this build has no CUDA";
  CHECK(*graph_gate_reason(in) == "this build has no CUDA");
  in.backend_available = true;
  CHECK_FALSE(graph_gate_reason(in));
  in.family_supported = false;
  in.family = "rtdetr";
  CHECK(*graph_gate_reason(in) == "rtdetr does not support training capture");
  std::string why;
#if LIBREYOLO_WITH_CUDA
  CHECK(make_cuda_graph_backend(-1, why) == nullptr);
  CHECK(why == "device is not CUDA");
#else
  CHECK(make_cuda_graph_backend(0, why) == nullptr);
  CHECK(why == "this build has no CUDA");
#endif
}

namespace {

std::map<std::string, at::Tensor> trained_weights(const std::filesystem::path& run) {
  const auto checkpoint = libreyolo::models::read_checkpoint(run / "weights" / "last.pt");
  std::map<std::string, at::Tensor> out;
  for (const auto& entry : checkpoint.extra("train_model")->toGenericDict()) out[entry.key().toStringRef()] = entry.value().toTensor();
  return out;
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("the trainer's graphed path (a fake backend on the CPU) trains the run eager trains, PGI branch and nbs included", "[graph][trainer]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("libreyolo_graph_trainer_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const auto synth = libreyolo::data::write_synthetic_dataset({.out = dir / "ds", .train_images = 12, .val_images = 2, .image_size = 64});
  // 3 batches an epoch, 2 epochs, 2 batches per optimizer step; YOLOv9's auxiliary branch on
  const std::vector<std::string> arguments{"model=yolo9-t", "data=" + synth.yaml.string(), "epochs=2", "batch=4", "nbs=8",
                                           "imgsz=64", "workers=0", "aux_weight=0.25", "warmup_epochs=0", "val=false",
                                           "quiet=true", "plots=false", "cuda_graph=true"};
  const auto config = libreyolo::models::parse_arguments(libreyolo::config::command_train, arguments);
  FakeBackend::Log log;
  for (const char* run : {"eager", "graphed"}) {
    if (std::string(run) == "graphed") {
      set_cpu_capture_backend_for_tests([&log] { return std::make_unique<FakeBackend>(log); });
    }
    fs::create_directories(dir / run);
    HookList hooks;
    run_training(config, dir / run, hooks);
    set_cpu_capture_backend_for_tests({});
  }
  CHECK(log.captures == 2);  // forward and backward, once
  CHECK(log.replays == 2 * 4);  // batches 3 to 6
  const auto eager = trained_weights(dir / "eager"), graphed = trained_weights(dir / "graphed");
  REQUIRE(eager.size() == graphed.size());
  for (const auto& [name, tensor] : eager) {
    if (!tensor.is_floating_point()) continue;
    INFO(name);
    CHECK(at::allclose(graphed.at(name), tensor, 1e-4, 1e-6));
  }
  CHECK(read_text(dir / "graphed" / "train.log").find("cuda_graph: captured training forward/backward at input shape 4x3x64x64") !=
        std::string::npos);
  fs::remove_all(dir);
}
