// CUDA-graph training's logic on the CPU, through a fake backend that records warm-ups,
// captures, replays and resets, and replays by running the captured work again: graphed and
// eager training must then agree exactly, which proves the static buffers, the BatchNorm
// snapshot and the gradient ownership under accumulation; plus LibreYOLO's shape counting,
// gating, invalidation and fallback. Like CUDA's, the fake's capture fails when the work reads
// the device from the host (item, nonzero, ...), so a step that passes here has none.
#include "core/config.h"
#include "data/synth.h"
#include "models/checkpoint.h"
#include "nn/conv.h"
#include "train/amp.h"
#include "train/capturable_optimizer.h"
#include "train/cuda_graph.h"
#include "train/host_reads.h"
#include "train/optimizer.h"
#include "train/trainer.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/optim/sgd.h>
#include <torch/utils.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <limits>
#include <optional>
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
// `host_read`: the network reads a value back (item()) in its forward, which CUDA cannot capture.
Trained train(GraphManager* manager, int steps, int accumulate, int odd_every = 0, bool host_read = false) {
  Net net;
  net.train();
  torch::optim::SGD sgd(net.parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  Trained out;
  const NetworkFunction network = [&](const at::Tensor& x) {
    auto outputs = net.forward(x);
    if (host_read && outputs[0].abs().max().item<double>() < 0) throw std::logic_error("unreachable");
    return outputs;
  };
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

TEST_CASE("HostReadWatch hears the operators that read the device from the host, while it lives", "[graph]") {
  const at::Tensor x = at::randn({64});
  const at::Tensor w = at::randn({64, 64});
  {
    const HostReadWatch watch;
    // what a captured step does: elementwise, matmul, reductions to tensors, top-k, sort, gather,
    // masks as arithmetic, one-hot by scatter
    const at::Tensor y = at::matmul(w, x).sigmoid();
    const at::Tensor masked = at::where(y > 0.5, y, at::zeros_like(y)) * (y < 0.9);
    const auto [values, index] = y.topk(5);
    const at::Tensor gathered = std::get<0>(masked.gather(0, index).sort()).cumsum(0);
    const at::Tensor one_hot = at::zeros({5, 64}).scatter_(1, index.unsqueeze(1), 1.0);
    CHECK(watch.empty());
    CHECK(watch.summary().empty());
    (void)gathered.sum().item<double>();  // a value read back
    CHECK_FALSE(watch.empty());
    CHECK(watch.summary() == "aten::_local_scalar_dense x1");
    const at::Tensor indexed = y.index({y > 0.5});  // a boolean mask: nonzero inside
    CHECK(watch.summary() == "aten::_local_scalar_dense x1, aten::nonzero x1");
    const at::Tensor picked = y.masked_select(y > 0.5);  // an output sized by the data (on the CPU it reads its count back)
    CHECK(watch.summary().find("aten::masked_select x1") != std::string::npos);
    CHECK(picked.numel() == indexed.numel());
    CHECK(one_hot.sum().item<double>() == 5);
  }
  const HostReadWatch later;
  CHECK(later.empty());  // the first watch's operators are not this one's
  CHECK(is_host_read_operator("aten::nonzero"));
  CHECK_FALSE(is_host_read_operator("aten::nonzero_static"));  // a fixed size: capturable
  CHECK_FALSE(is_host_read_operator("aten::add"));
}

TEST_CASE("graphs: a capture whose work reads the device from the host fails, as CUDA's would, and says which operator", "[graph]") {
  FakeBackend::Log log;
  GraphManager manager(std::make_unique<FakeBackend>(log));
  const Trained graphed = train(&manager, 8, 2, 0, /*host_read=*/true);
  check_same(train(nullptr, 8, 2, 0, /*host_read=*/true), graphed);  // the run went on eager, nothing lost
  REQUIRE(manager.disabled());
  CHECK(*manager.disabled_reason() ==
        "graph capture failed: the captured work reads the device from the host (aten::_local_scalar_dense x1), which a CUDA "
        "graph cannot hold");
  CHECK(manager.counts().replays == 0);
  CHECK(manager.counts().eager == 8);
  CHECK(log.captures == 1);  // the forward's capture, refused
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

TEST_CASE("graphs: the optimizer step is staged every time, warmed up, captured once and replayed", "[graph]") {
  FakeBackend::Log log;
  GraphManager manager(std::make_unique<FakeBackend>(log), {.optimizer = true});
  int staged = 0, worked = 0;
  for (int step = 0; step < 6; ++step) manager.optimizer_step([&] { ++staged; }, [&] { ++worked; });
  CHECK(staged == 6);
  CHECK(worked == 6);  // steps 1 eager, 2 the warm-up, 3 the capture (this backend runs the work then), 4-6 replays
  CHECK(log.warmups == 1);
  CHECK(log.captures == 1);
  CHECK(log.replays == 3);
  CHECK(manager.counts().optimizer_captures == 1);
  CHECK(manager.counts().optimizer_replays == 3);
  manager.invalidate("test");  // counted again: eager, warm-up, capture
  for (int step = 0; step < 3; ++step) manager.optimizer_step([&] { ++staged; }, [&] { ++worked; });
  CHECK(log.captures == 2);
  CHECK(log.replays == 3);
  CHECK(worked == 9);

  GraphManager network_only(std::make_unique<FakeBackend>(log), {});  // cuda_graph_scope=network
  for (int step = 0; step < 5; ++step) network_only.optimizer_step([&] { ++staged; }, [&] { ++worked; });
  CHECK(network_only.counts().optimizer_eager == 5);
  CHECK(log.captures == 2);
}

TEST_CASE("graphs: a failed optimizer-step capture or replay runs that step eagerly, once, and the run stays eager", "[graph]") {
  for (const bool capture_fails : {true, false}) {
    FakeBackend::Log log;
    GraphManager manager(std::make_unique<FakeBackend>(log), {.optimizer = true});
    int worked = 0;
    for (int step = 0; step < 6; ++step) {
      if (step == (capture_fails ? 2 : 4)) (capture_fails ? log.fail_capture : log.fail_replay) = true;
      manager.optimizer_step([] {}, [&] { ++worked; });
    }
    CHECK(worked == 6);
    CHECK(manager.disabled());
    CHECK(manager.disabled_reason()->find(capture_fails ? "optimizer step capture failed" : "optimizer step replay failed") == 0);
    CHECK_FALSE(manager.graphs_optimizer());
  }
}

namespace {

// SGD steps through a float16-style loss scaler and clipping, the optimizer step graphed when a
// manager is given; at step `overflow` one gradient is set to inf (the step must be skipped).
Trained train_scaled(GraphManager* manager, int steps, int overflow) {
  Net net;
  net.train();
  ParameterGroups groups;
  groups.weights = net.parameters();
  auto optimizer = make_optimizer(groups, {.name = "sgd", .lr0 = 0.05, .momentum = 0.9, .nesterov = true, .weight_decay = 1e-3});
  auto& capturable = dynamic_cast<CapturableOptimizer&>(*optimizer);
  capturable.use_device_tensors(true);  // the form a GPU captures: hyperparameters and the skip in tensors
  GradScaler scaler(true, 1024.0, 2.0, 0.5, 2);
  Trained out;
  for (int step = 0; step < steps; ++step) {
    torch::manual_seed(100 + static_cast<std::uint64_t>(step));
    const at::Tensor x = at::randn({4, 3, 16, 16});
    optimizer->zero_grad(/*set_to_none=*/manager == nullptr);
    const at::Tensor loss = loss_of(net.forward(x));
    scaler.scale(loss).backward();
    if (step == overflow) net.parameters()[0].grad().view(-1)[0] = std::numeric_limits<float>::infinity();
    out.losses.push_back(loss.item<double>());
    set_learning_rate(*optimizer, 0.05 / (step + 1));  // a schedule: new values every step, no re-capture
    set_momentum(*optimizer, 0.8 + 0.01 * step);
    const auto stage = [&] { capturable.stage(); };
    const auto work = [&] {
      scaler.begin_step();
      scaler.unscale(*optimizer);
      std::vector<at::Tensor> grads;
      for (const auto& p : net.parameters()) grads.push_back(p.grad());
      clip_gradients(grads, 0.5);
      scaler.step(*optimizer, /*stage=*/false);
      scaler.update();
    };
    if (manager) manager->optimizer_step(stage, work);
    else {
      stage();
      work();
    }
  }
  for (auto& p : net.parameters()) out.parameters.push_back(p.detach().clone());
  out.losses.push_back(scaler.current_scale());
  return out;
}

}  // namespace

TEST_CASE("graphs: a replayed optimizer step (scaler, clipping, schedule, an overflow) equals eager's", "[graph]") {
  const Trained eager = train_scaled(nullptr, 8, 5);
  FakeBackend::Log log;
  GraphManager manager(std::make_unique<FakeBackend>(log), {.optimizer = true});
  const Trained graphed = train_scaled(&manager, 8, 5);
  CHECK(log.replays == 5);  // the overflow at step 6 is a replay
  // the scale: doubled after steps 2 and 4, halved at the overflow (step 6), doubled after step 8
  CHECK(eager.losses.back() == 4096.0);
  check_same(eager, graphed);
}

TEST_CASE("validation graphs: one per recurring batch shape from its 3rd batch, outputs as eager's, dropped by reset", "[graph]") {
  Net net;
  net.body->eval();
  at::NoGradGuard no_grad;
  const NetworkFunction network = [&](const at::Tensor& x) { return net.forward(x); };
  FakeBackend::Log log;
  InferenceGraphs graphs(std::make_unique<FakeBackend>(log));
  const std::vector<std::int64_t> sizes{16, 16, 16, 16, 24, 16, 24, 24, 24, 32};
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    torch::manual_seed(40 + i);
    const at::Tensor x = at::randn({2, 3, sizes[i], sizes[i]});
    const auto expected = network(x);
    const auto got = graphs.forward(x, network);
    REQUIRE(got.size() == expected.size());
    for (std::size_t k = 0; k < got.size(); ++k) CHECK(at::allclose(got[k], expected[k], 1e-5, 1e-7));
  }
  CHECK(graphs.captures() == 2);  // 16 at its 3rd batch, 24 at its 3rd; 32 once: eager
  CHECK(graphs.replays() == 5);   // 16: batches 3, 4, 6; 24: 8, 9
  CHECK(graphs.eager() == 5);
  CHECK(log.warmups == 2);
  graphs.reset();
  CHECK(log.resets == 1);
  CHECK(graphs.captures() == 0);
  log.fail_replay = true;  // counted again from nothing; a failure turns the rest eager
  for (int i = 0; i < 5; ++i) {
    const at::Tensor x = at::randn({2, 3, 16, 16});
    const auto got = graphs.forward(x, network);
    CHECK(at::allclose(got[0], network(x)[0], 1e-5, 1e-7));
  }
  CHECK(graphs.replays() == 0);
  CHECK(graphs.eager() == 5);
}

namespace {

std::map<std::string, at::Tensor> trained_weights(const std::filesystem::path& run) {
  const auto checkpoint = libreyolo::models::read_checkpoint(run / "weights" / "last.pt");
  std::map<std::string, at::Tensor> out;
  for (const auto& entry : checkpoint.extra("train_model")->toGenericDict()) out[entry.key().toStringRef()] = entry.value().toTensor();
  return out;
}

// Graphed and eager runs must see the same thread count: without OMP_NUM_THREADS the trainer
// drops threads while another process competes (contention.h), and a reduction split differently
// rounds differently. meson sets it; this keeps a run by hand deterministic too.
void fix_thread_count() { ::setenv("OMP_NUM_THREADS", "1", /*overwrite=*/0); }

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Each epoch's validation figures from results.csv (the columns named metrics/*), as text.
std::vector<std::string> results_metrics(const std::filesystem::path& run) {
  std::ifstream in(run / "results.csv");
  std::string line;
  std::getline(in, line);
  std::vector<bool> wanted;
  std::stringstream header(line);
  for (std::string name; std::getline(header, name, ',');) wanted.push_back(name.rfind("metrics/", 0) == 0);
  std::vector<std::string> out;
  while (std::getline(in, line)) {
    std::stringstream row(line);
    std::size_t column = 0;
    for (std::string value; std::getline(row, value, ','); ++column) {
      if (column < wanted.size() && wanted[column]) out.push_back(value);
    }
  }
  return out;
}

// `config` trained into dir/eager, then into dir/graphed with the fake capture backend (its
// captures and replays counted in `log`).
void train_eager_then_graphed(const libreyolo::config::Config& config, const std::filesystem::path& dir, FakeBackend::Log& log) {
  for (const char* run : {"eager", "graphed"}) {
    if (std::string(run) == "graphed") {
      set_cpu_capture_backend_for_tests([&log] { return std::make_unique<FakeBackend>(log); });
    }
    std::filesystem::create_directories(dir / run);
    HookList hooks;
    run_training(config, dir / run, hooks);
    set_cpu_capture_backend_for_tests({});
  }
}

struct DeviceForms {
  DeviceForms() { libreyolo::train::set_device_forms_for_tests(true); }
  ~DeviceForms() { libreyolo::train::set_device_forms_for_tests(false); }
  DeviceForms(const DeviceForms&) = delete;
  DeviceForms& operator=(const DeviceForms&) = delete;
};

}  // namespace

TEST_CASE("the trainer's graphed path (a fake backend on the CPU) trains the run eager trains, PGI branch and nbs included", "[graph][trainer]") {
  fix_thread_count();
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
  train_eager_then_graphed(config, dir, log);
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

TEST_CASE("cuda_graph_scope=loss/optimizer/step (a fake backend on the CPU): the step graph, the optimizer graph, clipping and EMA train the run eager trains", "[graph][trainer]") {
  fix_thread_count();
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("libreyolo_graph_step_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const auto synth = libreyolo::data::write_synthetic_dataset({.out = dir / "ds", .train_images = 12, .val_images = 12, .image_size = 64});
  // 3 batches an epoch, 2 optimizer steps an epoch (nbs=8: windows of 2 batches, then 1), 3 epochs;
  // warm-up on, so lr and momentum change at every step of the graph's replays; validation (3
  // batches of one shape) replays its 3rd batch from an inference graph
  const auto arguments = [&](const std::string& scope) {
    std::vector<std::string> out{"model=yolo9-t", "data=" + synth.yaml.string(), "epochs=3", "batch=4", "nbs=8", "imgsz=64",
                                 "workers=0", "warmup_epochs=3", "clip_max_norm=10.0", "quiet=true", "plots=false",
                                 "max_labels=16"};
    if (!scope.empty()) {
      out.push_back("cuda_graph=true");
      out.push_back("cuda_graph_scope=" + scope);
    }
    return out;
  };
  const auto run = [&](const std::string& name, const std::string& scope) {
    fs::create_directories(dir / name);
    HookList hooks;
    run_training(libreyolo::models::parse_arguments(libreyolo::config::command_train, arguments(scope)), dir / name, hooks);
  };
  // Every run in the forms a GPU captures (the loss's static shapes, the optimizer's and EMA's
  // device tensors), so that the runs differ in the graphs alone: the CPU's own forms assign TAL's
  // near-ties (a fresh network's) differently by rounding, and 6 steps make that 1% of a weight.
  const DeviceForms forms;
  run("eager", "");
  const auto eager = trained_weights(dir / "eager");
  const auto ema_eager = libreyolo::models::read_checkpoint(dir / "eager" / "weights" / "last.pt").model;
  struct Expected {
    const char* scope;
    int captures, replays;  // step graph: captured at batch 3, replayed at batches 3-9; optimizer graph: steps 4-6;
                            // validation (the final epoch's): a graph for its 3rd batch
  };
  for (const Expected& e : {Expected{"loss", 1 + 1, 7 + 1}, Expected{"optimizer", 2 + 1, 10 + 1}, Expected{"step", 2 + 1, 10 + 1}}) {
    INFO(e.scope);
    FakeBackend::Log log;
    set_cpu_capture_backend_for_tests([&log] { return std::make_unique<FakeBackend>(log); });
    run(e.scope, e.scope);
    set_cpu_capture_backend_for_tests({});
    CHECK(log.captures == e.captures);
    CHECK(log.replays == e.replays);
    const auto graphed = trained_weights(dir / e.scope);
    REQUIRE(eager.size() == graphed.size());
    for (const auto& [name, tensor] : eager) {
      if (!tensor.is_floating_point()) continue;
      INFO(name);
      CHECK(at::allclose(graphed.at(name), tensor, 1e-4, 1e-6));
    }
    // the EMA (the checkpoint's model) too
    const auto ema_graphed = libreyolo::models::read_checkpoint(dir / e.scope / "weights" / "last.pt").model;
    REQUIRE(ema_eager.size() == ema_graphed.size());
    for (std::size_t i = 0; i < ema_eager.size(); ++i) {
      if (!ema_eager[i].second.is_floating_point()) continue;
      INFO(ema_eager[i].first);
      CHECK(at::allclose(ema_graphed[i].second, ema_eager[i].second, 1e-4, 1e-6));
    }
    const std::string text = read_text(dir / e.scope / "train.log");
    CHECK(text.find("cuda_graph: captured the training step (forward, loss, backward) at 4x3x64x64, 16 label slots") != std::string::npos);
    CHECK((text.find("cuda_graph: captured the optimizer step") != std::string::npos) == (e.captures == 3));
    CHECK(text.find("captured training forward/backward") == std::string::npos);  // one graph holds the network
    CHECK(text.find("cuda_graph: validation replays 1 of 3 batches from 1 graphs") != std::string::npos);
    CHECK(text.find(e.captures == 2 ? "cuda_graph: 7 of 9 batches replayed from the step graph\n"
                                    : "cuda_graph: 7 of 9 batches replayed from the step graph; 3 of 6 optimizer steps replayed\n") !=
          std::string::npos);
    CHECK_FALSE(results_metrics(dir / "eager").empty());
    CHECK(results_metrics(dir / e.scope) == results_metrics(dir / "eager"));
  }
  fs::remove_all(dir);
}

namespace {

// Listens for host reads from each step's start to its end, except in its to_device phase (whose
// target padding works on the loader's CPU tensors on every device), and lists what it heard.
struct HostReadsPerStep : TrainHook {
  std::optional<HostReadWatch> watch;
  int steps = 0;
  std::vector<std::string>& heard;
  explicit HostReadsPerStep(std::vector<std::string>& out) : heard(out) {}
  void stop() {
    if (watch && !watch->empty()) heard.push_back(watch->summary());
    watch.reset();
  }
  void on_step_start(const TrainState&) override { watch.emplace(); }
  void on_phase_start(Phase phase) override {
    if (phase == Phase::to_device) stop();
  }
  void on_phase_end(Phase phase) override {
    if (phase == Phase::to_device) watch.emplace();
  }
  void on_step_end(const TrainState&) override {
    ++steps;
    stop();
  }
};

}  // namespace

TEST_CASE("a step in the forms a GPU runs reads nothing back from the device, eager or graphed (the CPU half of gpu/sync_free.sh)", "[graph][trainer]") {
  fix_thread_count();
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("libreyolo_host_reads_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const auto synth = libreyolo::data::write_synthetic_dataset({.out = dir / "ds", .train_images = 12, .val_images = 2, .image_size = 64});
  const DeviceForms forms;
  for (const std::string scope : {"", "step"}) {
    INFO(scope);
    std::vector<std::string> arguments{"model=yolo9-t", "data=" + synth.yaml.string(), "epochs=1", "batch=2", "nbs=4", "imgsz=64",
                                       "workers=0", "val=false", "quiet=true", "plots=false", "clip_max_norm=10.0", "max_labels=16"};
    FakeBackend::Log log;
    if (!scope.empty()) {
      arguments.insert(arguments.end(), {"cuda_graph=true", "cuda_graph_scope=" + scope});
      set_cpu_capture_backend_for_tests([&log] { return std::make_unique<FakeBackend>(log); });
    }
    std::vector<std::string> heard;
    HookList hooks;
    auto hook = std::make_unique<HostReadsPerStep>(heard);
    const HostReadsPerStep& listener = *hook;
    hooks.add(std::move(hook));
    fs::create_directories(dir / ("run" + scope));
    run_training(libreyolo::models::parse_arguments(libreyolo::config::command_train, arguments), dir / ("run" + scope), hooks);
    set_cpu_capture_backend_for_tests({});
    CHECK(listener.steps == 6);
    CHECK(heard == std::vector<std::string>{});
    if (!scope.empty()) CHECK(log.captures == 2);  // the step graph and the optimizer's
  }
  fs::remove_all(dir);
}

TEST_CASE("cuda_graph_scope=loss on YOLOX: its loss stays eager, the network is graphed, one log line says why", "[graph][trainer]") {
  fix_thread_count();
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("libreyolo_graph_yolox_" + std::to_string(::getpid()));
  fs::create_directories(dir / "run");
  const auto synth = libreyolo::data::write_synthetic_dataset({.out = dir / "ds", .train_images = 8, .val_images = 2, .image_size = 64});
  const std::vector<std::string> arguments{"model=yolox-n", "data=" + synth.yaml.string(), "epochs=1", "batch=2", "imgsz=64",
                                           "workers=0", "val=false", "quiet=true", "plots=false", "cuda_graph=true",
                                           "cuda_graph_scope=loss"};
  FakeBackend::Log log;
  set_cpu_capture_backend_for_tests([&log] { return std::make_unique<FakeBackend>(log); });
  HookList hooks;
  run_training(libreyolo::models::parse_arguments(libreyolo::config::command_train, arguments), dir / "run", hooks);
  set_cpu_capture_backend_for_tests({});
  const std::string text = read_text(dir / "run" / "train.log");
  CHECK(text.find("cuda_graph_scope=loss: yolox's loss stays eager (SimOTA's dynamic-k assignment has data-dependent shapes); "
                  "the network's forward and backward are graphed instead") != std::string::npos);
  CHECK(text.find("captured training forward/backward at input shape 2x3x64x64") != std::string::npos);
  CHECK(log.captures == 2);
  fs::remove_all(dir);
}

namespace {

// A DETR under cuda_graph=true (a fake backend on the CPU): its backbone and encoder are captured,
// the decoder stays eager, and the run trains the eager run's weights.
void check_detr_graph_region(const std::string& model, int imgsz, const std::vector<std::string>& extra = {}, double atol = 1e-6) {
  fix_thread_count();
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("libreyolo_graph_" + model + "_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const auto synth = libreyolo::data::write_synthetic_dataset({.out = dir / "ds", .train_images = 8, .val_images = 2, .image_size = imgsz});
  // 4 batches an epoch, 2 epochs: the 3rd batch is captured, it and the 5 after it replay
  const std::vector<std::string> arguments{"model=" + model, "data=" + synth.yaml.string(), "epochs=2", "batch=2",
                                           "imgsz=" + std::to_string(imgsz), "workers=0", "val=false", "quiet=true", "plots=false",
                                           "cuda_graph=true"};
  std::vector<std::string> all = arguments;
  all.insert(all.end(), extra.begin(), extra.end());
  const auto config = libreyolo::models::parse_arguments(libreyolo::config::command_train, all);
  FakeBackend::Log log;
  train_eager_then_graphed(config, dir, log);
  CHECK(log.captures == 2);     // the region's forward and backward, once
  CHECK(log.replays == 2 * 6);  // batches 3 to 8
  // the decoder's gradients reach the graphed encoder's: every weight trains as eager's
  const auto eager = trained_weights(dir / "eager"), graphed = trained_weights(dir / "graphed");
  REQUIRE(eager.size() == graphed.size());
  std::size_t decoder = 0;
  for (const auto& [name, tensor] : eager) {
    if (!tensor.is_floating_point()) continue;
    decoder += name.starts_with("decoder.");
    INFO(fmt::format("{}: differs by up to {:.3g} (largest value {:.3g})", name, (graphed.at(name) - tensor).abs().max().item<double>(),
                     tensor.abs().max().item<double>()));
    CHECK(at::allclose(graphed.at(name), tensor, 1e-4, atol));
  }
  CHECK(decoder > 0);
  const std::string text = read_text(dir / "graphed" / "train.log");
  CHECK(text.find("cuda_graph: the backbone and encoder's forward and backward are captured on the 3rd batch of a shape") != std::string::npos);
  CHECK(text.find("the decoder (its denoising queries follow each batch's targets) and the loss stay eager") != std::string::npos);
  CHECK(text.find(fmt::format("captured training forward/backward at input shape 2x3x{0}x{0}", imgsz)) != std::string::npos);
  CHECK(text.find("ignored") == std::string::npos);  // not the eager fallback
  fs::remove_all(dir);
}

}  // namespace

TEST_CASE("RT-DETR under cuda_graph=true (a fake backend on the CPU): backbone and encoder captured, the decoder eager, the run eager trains", "[graph][trainer][detr]") {
  check_detr_graph_region("rtdetr-r18", 160);
}

TEST_CASE("D-FINE under cuda_graph=true (a fake backend on the CPU): backbone and encoder captured, the decoder eager, the run eager trains", "[graph][trainer][detr][dfine]") {
  // its two levels at strides 16 and 32 feed 300 queries from 288 px. The graphed backward is a pass
  // of its own from the decoder's gradients, and the runs differ by rounding: with SGD by 1.2e-6 at
  // most (a running mean), where AdamW's normalised steps made it a sizeable share of a step on the
  // tiny gradients of the learnable affine's biases (1.4e-5 of 2.5e-5)
  check_detr_graph_region("dfine-n", 288, {"optimizer=sgd", "lr0=0.001"}, 1e-5);
}
