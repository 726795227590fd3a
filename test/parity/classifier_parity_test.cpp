// Parity of our classifier networks with libreyolo 1.6.0's (make_classifier_reference.py):
// MobileNetV4 s/m/l and ResNet 18/50. Its state dict loads by name (strict), and on the same
// input the eval logits, the train-mode logits, the gradient of every parameter and the updated
// running statistics equal the reference's.
//   classifier_parity_test DIR
#include "models/mobilenetv4/model.h"
#include "models/resnet/model.h"
#include "models/safetensors.h"
#include "module_parity.h"

#include <ATen/ATen.h>
#include <fmt/core.h>
#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>

using namespace libreyolo::models;

namespace {

using parity::Comparison;
using parity::Tensors;
using parity::with_prefix;

bool run_case(const Tensors& io, const std::string& name) {
  const at::Tensor config = io.at(name + ".config");
  const bool resnet_family = config[0].item<std::int64_t>() == 1;
  const auto code = config[1].item<std::int64_t>();
  const int classes = static_cast<int>(config[2].item<std::int64_t>());
  std::shared_ptr<torch::nn::Module> module;
  std::function<at::Tensor(const at::Tensor&)> forward;
  std::string title;
  if (resnet_family) {
    resnet::Model net(std::to_string(code), classes);
    module = net.ptr();
    forward = [net](const at::Tensor& x) mutable { return net->forward(x); };
    title = fmt::format("ResNet-{}", code);
  } else {
    const std::string size = code == 0 ? "s" : code == 1 ? "m" : "l";
    mobilenetv4::Model net(size, classes);
    module = net.ptr();
    forward = [net](const at::Tensor& x) mutable { return net->forward(x); };
    title = fmt::format("MobileNetV4-{}", size);
  }
  load_state_dict(*module, with_prefix(io, name + ".state."));
  const at::Tensor& input = io.at(name + ".input");
  Comparison eval, train, grads, stats;
  module->eval();
  {
    torch::NoGradGuard no_grad;
    eval.add(forward(input), io.at(name + ".eval0"));
  }
  module->train();
  const at::Tensor out = forward(input);
  train.add(out.detach(), io.at(name + ".train0"));
  (out * io.at(name + ".weights0")).sum().backward();
  parity::compare_gradients(*module, with_prefix(io, name + ".grad."), grads);
  for (const auto& [key, value] : with_prefix(io, name + ".after.")) stats.add(module->named_buffers()[key], value);
  const bool ok = eval.worst <= 1e-5 && train.worst <= 1e-5 && grads.worst <= 1e-4 && stats.worst <= 1e-6;
  fmt::print("{}: {} ({} classes): eval {:.2g}, train {:.2g}, {} gradients {:.2g}, statistics {:.2g} (max rel. diff); "
             "{} of {} tensors bit-identical: {}\n",
             name, title, classes, eval.worst, train.worst, grads.compared, grads.worst, stats.worst,
             eval.exact + train.exact + grads.exact + stats.exact, eval.compared + train.compared + grads.compared + stats.compared,
             ok ? "ok" : "MISMATCH");
  return ok;
}

}  // namespace

int main(int argc, char** argv) { return parity::run_cases(argc, argv, "classifier.safetensors", "config", "classifier", run_case); }
