// The capturable optimizers against torch::optim's own SGD, Adam and AdamW: the same groups, the
// same gradients and a schedule that changes lr and momentum every step give the same weights and
// state; a masked (overflowed) step changes nothing; the state round-trips through checkpoints.
#include "train/amp.h"
#include "train/capturable_optimizer.h"
#include "train/ema.h"
#include "train/optimizer.h"

#include <torch/torch.h>

#include <limits>

#include "catch.h"  // last: see catch.h

using namespace libreyolo::train;

namespace {

// Three groups as make_optimizer forms them (no decay, decay, no decay), of odd shapes.
struct Weights {
  std::vector<at::Tensor> bn, weights, biases;
  explicit Weights(std::uint64_t seed) {
    torch::manual_seed(seed);
    bn = {torch::randn({8}), torch::randn({5})};
    weights = {torch::randn({4, 3, 3, 3}), torch::randn({7, 5})};
    biases = {torch::randn({4}), torch::randn({7})};
    for (auto* list : {&bn, &weights, &biases})
      for (auto& t : *list) t.set_requires_grad(true);
  }
  std::vector<at::Tensor> all() const {
    std::vector<at::Tensor> out = bn;
    out.insert(out.end(), weights.begin(), weights.end());
    out.insert(out.end(), biases.begin(), biases.end());
    return out;
  }
  ParameterGroups groups() const {
    ParameterGroups g;
    g.bn = bn;
    g.weights = weights;
    g.biases = biases;
    return g;
  }
};

template <typename Options>
std::vector<torch::optim::OptimizerParamGroup> torch_groups(const Weights& w, const Options& base, double decay) {
  std::vector<torch::optim::OptimizerParamGroup> out;
  for (const auto& [params, d] : {std::pair{w.bn, 0.0}, std::pair{w.weights, decay}, std::pair{w.biases, 0.0}}) {
    auto options = std::make_unique<Options>(base);
    options->weight_decay(d);
    out.emplace_back(params, std::move(options));
  }
  return out;
}

std::unique_ptr<torch::optim::Optimizer> reference(const Weights& w, const OptimizerOptions& o) {
  if (o.name == "sgd") {
    const auto base = torch::optim::SGDOptions(o.lr0).momentum(o.momentum).nesterov(o.nesterov);
    return std::make_unique<torch::optim::SGD>(torch_groups(w, base, o.weight_decay), base);
  }
  if (o.name == "adam") {
    const auto base = torch::optim::AdamOptions(o.lr0);
    return std::make_unique<torch::optim::Adam>(torch_groups(w, base, o.weight_decay), base);
  }
  const auto base = torch::optim::AdamWOptions(o.lr0);
  return std::make_unique<torch::optim::AdamW>(torch_groups(w, base, o.weight_decay), base);
}

void copy_weights(const Weights& from, const Weights& to) {
  at::NoGradGuard no_grad;
  for (std::size_t i = 0; i < from.all().size(); ++i) to.all()[i].copy_(from.all()[i]);
}

void set_gradients(const Weights& w, int step) {
  torch::manual_seed(1000 + step);
  for (auto p : w.all()) p.mutable_grad() = torch::randn_like(p);
}

double max_difference(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, (a[i] - b[i]).abs().max().item<double>());
  return worst;
}

// float32 ulps: the bias corrections are computed in float on the device, PyTorch's in double on the host
bool close(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!at::allclose(a[i], b[i], /*rtol=*/1e-5, /*atol=*/1e-6)) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("Capturable SGD, Adam and AdamW step like torch::optim's under a changing schedule, in both forms", "[optimizer]") {
  for (const bool device_form : {false, true}) {  // the CPU's host-Scalar form and the form a GPU captures
    for (const char* name : {"sgd", "adam", "adamw"}) {
      for (const bool nesterov : {true, false}) {
        if (std::string(name) != "sgd" && !nesterov) continue;
        const OptimizerOptions options{.name = name, .lr0 = 0.01, .momentum = 0.9, .nesterov = nesterov, .weight_decay = 0.05};
        const Weights ours(7), theirs(7);
        auto optimizer = make_optimizer(ours.groups(), options);
        REQUIRE(dynamic_cast<CapturableOptimizer*>(optimizer.get()) != nullptr);
        dynamic_cast<CapturableOptimizer&>(*optimizer).use_device_tensors(device_form);
        auto expected = reference(theirs, options);
        for (int step = 0; step < 6; ++step) {
          set_gradients(ours, step);
          set_gradients(theirs, step);
          for (auto* o : {optimizer.get(), expected.get()}) {  // warm-up-like: every step its own lr and momentum
            set_learning_rate(*o, 0.01 * (step + 1));
            set_momentum(*o, 0.8 + 0.02 * step);
          }
          optimizer->step();
          expected->step();
        }
        INFO(name << " nesterov " << nesterov << " device form " << device_form << ": largest difference "
                  << max_difference(ours.all(), theirs.all()));
        CHECK(close(ours.all(), theirs.all()));
        // the state in torch.optim's layout is the same too (Adam's step count written back)
        const auto a = optimizer_state(*optimizer).toGenericDict().at("state").toGenericDict();
        const auto b = optimizer_state(*expected).toGenericDict().at("state").toGenericDict();
        REQUIRE(a.size() == b.size());
        for (const auto& entry : b) {
          const auto ours_entry = a.at(entry.key()).toGenericDict();
          for (const auto& field : entry.value().toGenericDict()) {
            CHECK(at::allclose(ours_entry.at(field.key()).toTensor(), field.value().toTensor(), 1e-5, 1e-6));
          }
        }
      }
    }
  }
}

TEST_CASE("On the CPU, SGD's fused kernel and its per-tensor loop give torch::optim's weights to float rounding", "[optimizer]") {
  // Channels-last weights: one with a channels-last gradient (ATen's fused kernel takes it), one
  // with a contiguous gradient (laid out differently: the loop takes it; the fused kernel, which
  // walks all three as flat arrays, would pair the wrong elements: 0.86 off); the rest are plain.
  // The fused kernel's vector lanes give torch::optim's bits; its scalar tail (the last elements
  // of a tensor whose size is no multiple of the vector width) differs by an ulp at most.
  for (const bool nesterov : {true, false}) {
    const OptimizerOptions options{.name = "sgd", .lr0 = 0.01, .momentum = 0.937, .nesterov = nesterov, .weight_decay = 5e-4};
    Weights ours(9), theirs(9);
    for (auto* w : {&ours, &theirs}) {
      at::NoGradGuard no_grad;
      w->weights.push_back(torch::randn({6, 4, 3, 3}).contiguous(at::MemoryFormat::ChannelsLast).requires_grad_(true));
      w->weights.push_back(torch::randn({5, 3, 3, 3}).contiguous(at::MemoryFormat::ChannelsLast).requires_grad_(true));
    }
    copy_weights(ours, theirs);
    auto optimizer = make_optimizer(ours.groups(), options);
    auto expected = reference(theirs, options);
    for (int step = 0; step < 4; ++step) {
      for (auto* w : {&ours, &theirs}) {
        set_gradients(*w, step);  // randn_like: the channels-last weights get channels-last gradients
        at::Tensor& plain = w->weights.back().mutable_grad();
        plain = plain.contiguous();
        REQUIRE_FALSE(plain.is_contiguous(at::MemoryFormat::ChannelsLast));
        REQUIRE(w->weights[w->weights.size() - 2].grad().is_contiguous(at::MemoryFormat::ChannelsLast));
      }
      set_learning_rate(*optimizer, 0.01 * (step + 1));
      set_learning_rate(*expected, 0.01 * (step + 1));
      optimizer->step();
      expected->step();
    }
    INFO("nesterov " << nesterov << ": largest difference " << max_difference(ours.all(), theirs.all()));
    for (std::size_t i = 0; i < ours.all().size(); ++i) {
      INFO("tensor " << i);
      CHECK(at::allclose(ours.all()[i], theirs.all()[i], /*rtol=*/2.5e-7, /*atol=*/1e-9));
    }
  }
}

TEST_CASE("A masked step changes no weight, buffer or count; the next clean step goes on as if it never ran", "[optimizer]") {
  for (const bool device_form : {false, true}) {
    for (const char* name : {"sgd", "adam", "adamw"}) {
      INFO(name << " device form " << device_form);
      const OptimizerOptions options{.name = name, .lr0 = 0.01, .momentum = 0.9, .nesterov = true, .weight_decay = 0.05};
      const Weights ours(3), theirs(3);
      auto optimizer = make_optimizer(ours.groups(), options);
      auto expected = make_optimizer(theirs.groups(), options);
      auto& capturable = dynamic_cast<CapturableOptimizer&>(*optimizer);
      capturable.use_device_tensors(device_form);
      const at::Tensor overflow = torch::ones({}), clean = torch::zeros({});
      for (const bool first_skipped : {true, false}) {
        set_gradients(ours, first_skipped ? 0 : 1);
        const std::vector<at::Tensor> before = [&] {
          std::vector<at::Tensor> out;
          for (const auto& p : ours.all()) out.push_back(p.detach().clone());
          return out;
        }();
        ours.weights[0].mutable_grad()[0][0][0][0] = std::numeric_limits<float>::infinity();
        capturable.stage();
        capturable.apply(overflow);  // a first step that is skipped (no state yet) and a later one
        CHECK(max_difference(ours.all(), before) == 0);
        set_gradients(ours, first_skipped ? 0 : 1);
        set_gradients(theirs, first_skipped ? 0 : 1);
        capturable.stage();
        capturable.apply(clean);
        expected->step();
        CHECK(close(ours.all(), theirs.all()));
      }
    }
  }
}

TEST_CASE("GradScaler over a capturable optimizer decides the skip on the device", "[optimizer][amp]") {
  for (const bool device_form : {false, true}) {
    INFO("device form " << device_form);
    const Weights w(5);
    auto optimizer =
        make_optimizer(w.groups(), {.name = "sgd", .lr0 = 0.1, .momentum = 0.9, .nesterov = true, .weight_decay = 0});
    dynamic_cast<CapturableOptimizer&>(*optimizer).use_device_tensors(device_form);
    GradScaler scaler(true, 8.0, 2.0, 0.5, 2);
    (void)scaler.scale(torch::ones({}));
    set_gradients(w, 0);
    const at::Tensor before = w.weights[1].detach().clone();
    w.weights[1].mutable_grad()[0][0] = std::numeric_limits<float>::quiet_NaN();
    const at::Tensor stepped = scaler.step(*optimizer);
    scaler.update();
    CHECK_FALSE(stepped.item<bool>());
    CHECK(at::equal(w.weights[1].detach(), before));
    CHECK(scaler.current_scale() == 4.0);
    set_gradients(w, 1);
    CHECK(scaler.step(*optimizer).item<bool>());
    scaler.update();
    CHECK_FALSE(at::equal(w.weights[1].detach(), before));
  }
}

TEST_CASE("Adam's device step count survives a checkpoint round trip", "[optimizer]") {
  const Weights a(9), b(9);
  const OptimizerOptions options{.name = "adamw", .lr0 = 0.001, .weight_decay = 0.01};
  auto first = make_optimizer(a.groups(), options);
  for (int step = 0; step < 3; ++step) {
    set_gradients(a, step);
    first->step();
  }
  const c10::IValue saved = optimizer_state(*first);
  auto second = make_optimizer(b.groups(), options);
  copy_weights(a, b);
  load_optimizer_state(*second, saved);
  set_gradients(a, 3);
  set_gradients(b, 3);
  first->step();
  second->step();
  CHECK(max_difference(a.all(), b.all()) == 0);  // step 4's bias correction on both
  const auto state = optimizer_state(*second).toGenericDict().at("state").toGenericDict();
  CHECK(state.at(0).toGenericDict().at("step").toTensor().item<double>() == 4.0);
}

TEST_CASE("apply() reads the staged hyperparameters, not the host options (what a replayed graph sees)", "[optimizer]") {
  for (const char* name : {"sgd", "adam", "adamw"}) {
    INFO(name);
    const OptimizerOptions options{.name = name, .lr0 = 0.01, .momentum = 0.9, .nesterov = true, .weight_decay = 0.05};
    const Weights staged_early(4), staged_late(4);
    auto a = make_optimizer(staged_early.groups(), options);
    auto b = make_optimizer(staged_late.groups(), options);
    set_gradients(staged_early, 0);
    set_gradients(staged_late, 0);
    auto& ca = dynamic_cast<CapturableOptimizer&>(*a);
    ca.use_device_tensors(std::string(name) != "sgd");  // both forms: the host form reads the staged tensors back too
    ca.stage();                                         // lr 0.01, momentum 0.9 staged ...
    set_learning_rate(*a, 0.5);                         // ... then changed on the host only
    set_momentum(*a, 0.1);
    ca.apply({});
    b->step();  // lr 0.01, momentum 0.9
    CHECK(close(staged_early.all(), staged_late.all()));
  }
}

TEST_CASE("Cleared state (a divergence recovery) restarts Adam's step count with its moments", "[optimizer]") {
  const Weights a(11), b(11);
  const OptimizerOptions options{.name = "adam", .lr0 = 0.001, .weight_decay = 0.0};
  auto used = make_optimizer(a.groups(), options);
  for (int step = 0; step < 3; ++step) {
    set_gradients(a, step);
    used->step();
  }
  used->state().clear();
  dynamic_cast<CapturableOptimizer&>(*used).state_loaded();
  copy_weights(a, b);
  auto fresh = make_optimizer(b.groups(), options);
  set_gradients(a, 7);
  set_gradients(b, 7);
  used->step();
  fresh->step();
  CHECK(max_difference(a.all(), b.all()) == 0);  // step 1's bias correction on both
}

TEST_CASE("EMA: the device-tensor form a graph captures updates as the CPU's form does", "[optimizer][ema]") {
  const auto make = [] {
    torch::manual_seed(5);
    return torch::nn::Sequential(torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 4, 3)), torch::nn::BatchNorm2d(4));
  };
  torch::nn::Sequential model = make();
  std::vector<std::shared_ptr<torch::nn::Module>> averages;
  std::vector<ModelEma> emas;
  for (const bool device_form : {false, true}) {
    averages.push_back(make().ptr());
    emas.emplace_back(*model, averages.back(), 0.9999, 2000.0);
    emas.back().use_device_tensors(device_form);
  }
  for (int step = 0; step < 5; ++step) {
    {
      torch::NoGradGuard no_grad;
      for (auto& p : model->parameters()) p.add_(torch::randn_like(p));
      model->forward(torch::randn({2, 3, 8, 8}));  // the BatchNorm statistics move too (train mode)
    }
    for (auto& ema : emas) ema.update(*model);
  }
  const auto host = floating_state(*averages[0]), device = floating_state(*averages[1]);
  REQUIRE(host.size() == 6);  // conv weight and bias, BN weight, bias, mean, var
  for (std::size_t i = 0; i < host.size(); ++i) {
    CHECK(at::allclose(device[i], host[i], 1e-6, 1e-7));
    CHECK_FALSE(at::allclose(host[i], floating_state(*model)[i]));  // an average, not a copy
  }
}

TEST_CASE("EMA restart: a constant decay from then on, without the ramp", "[optimizer][ema]") {
  torch::manual_seed(3);
  torch::nn::Linear model(2, 2);
  torch::nn::Linear average(2, 2);
  ModelEma ema(*model, average.ptr(), 0.9999, 2000.0, /*updates=*/10);
  CHECK(ema.decay_at(10) == Approx(0.9999 * (1 - std::exp(-10.0 / 2000))));
  CHECK_FALSE(ema.restarted());
  ema.restart(0.9999);
  CHECK(ema.restarted());
  CHECK(ema.decay_at(11) == Approx(0.9999));  // LibreYOLO's set_decay(decay): the ramp is gone
  const at::Tensor before = average->weight.detach().clone();
  {
    torch::NoGradGuard no_grad;
    model->weight.add_(1.0);
  }
  ema.update(*model);
  CHECK(at::allclose(average->weight, before * 0.9999 + model->weight.detach() * (1 - 0.9999), 1e-6, 1e-7));
}
