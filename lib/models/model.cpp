#include "models/model.h"

#include "core/error.h"
#include "models/family.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <fmt/format.h>

#include <string_view>

namespace libreyolo::models {

namespace {

thread_local double convolution_flops = 0;  // of convolutions and BatchNorms

// Inputs are only readable in the start callback, outputs only in the end callback.
struct OperationsPerOutput : at::ObserverContext {
  double value = 0;
};

// thop's convention (what the YOLOX README's GFLOPs use): a convolution costs its multiply-adds
// plus one add per output for a bias, a BatchNorm two operations per element; FLOPs = 2 x that.
std::unique_ptr<at::ObserverContext> start_operation(const at::RecordFunction& function) {
  // aten::convolution only: the _convolution / mkldnn_convolution it calls would count again
  const std::string_view name = function.name();
  auto context = std::make_unique<OperationsPerOutput>();
  if (name == "aten::batch_norm") {
    context->value = 2;
    return context;
  }
  if (name != "aten::convolution") return nullptr;
  const auto inputs = function.inputs();
  if (inputs.size() < 3 || !inputs[1].isTensor()) return nullptr;
  const at::Tensor& weight = inputs[1].toTensor();  // [out, in / groups, kh, kw]
  const bool has_bias = inputs[2].isTensor() && inputs[2].toTensor().defined();
  context->value = static_cast<double>(weight.numel() / weight.size(0)) + (has_bias ? 1.0 : 0.0);
  return context;
}

void end_operation(const at::RecordFunction& function, at::ObserverContext* context) {
  if (context == nullptr) return;
  const auto& outputs = function.outputs();
  if (outputs.empty() || !outputs[0].isTensor()) return;
  convolution_flops +=
      2.0 * static_cast<double>(outputs[0].toTensor().numel()) * static_cast<OperationsPerOutput*>(context)->value;
}

}  // namespace

void to_channels_last(torch::nn::Module& module) {
  at::NoGradGuard no_grad;
  for (auto& parameter : module.parameters()) {
    if (parameter.dim() == 4) parameter.set_data(parameter.contiguous(at::MemoryFormat::ChannelsLast));
  }
  for (auto& buffer : module.buffers()) {
    if (buffer.dim() == 4) buffer.set_data(buffer.contiguous(at::MemoryFormat::ChannelsLast));
  }
}

Model build_model(const ModelName& name, int class_count, int class_hidden, bool fine_tune) {
  return family(name.family).build(name.size, class_count, class_hidden, fine_tune);
}

double model_gflops(const std::function<void()>& run) {
  convolution_flops = 0;
  auto handle = at::addThreadLocalCallback(
      at::RecordFunctionCallback(start_operation, end_operation).needsInputs(true).needsOutputs(true).scopes({at::RecordScope::FUNCTION}));
  try {
    run();
  } catch (...) {
    at::removeCallback(handle);
    throw;
  }
  at::removeCallback(handle);
  return convolution_flops / 1e9;
}

ModelSummary summarize(const Model& model, int image_height, int image_width) {
  ModelSummary summary;
  summary.layers = static_cast<std::int64_t>(model.module->modules().size());
  for (const auto& parameter : model.module->parameters()) {
    summary.parameters += parameter.numel();
    if (parameter.requires_grad()) summary.gradients += parameter.numel();
  }
  const bool was_training = model.module->is_training();
  model.module->eval();
  at::NoGradGuard no_grad;
  const at::Tensor image = at::zeros({1, 3, image_height, image_width});
  summary.gflops = model_gflops([&] { model.forward(image); });
  model.module->train(was_training);
  return summary;
}

}  // namespace libreyolo::models
