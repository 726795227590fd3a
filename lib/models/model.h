// One entry point from a model name (family + size) to a built network, whatever its family,
// plus the summary `libreyolo info` prints (layers, parameters, gradients, GFLOPs).
#pragma once

#include "models/model_name.h"
#include "models/targets.h"

#include <ATen/Tensor.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace libreyolo::models {

// Where a data-parallel rank's batch sits in the global batch: the sampler deals the global batch
// out in turn, so rank r's image j is the global batch's image r + world_size * j. `global_max`
// gives the largest of a value over the ranks (every rank calls it, at the same point of the step).
// A single process keeps the defaults (no function: its own batch is the global one).
struct BatchShare {
  int rank = 0, world_size = 1;
  std::function<std::int64_t(std::int64_t)> global_max;
};

struct Model {
  std::string display_name;  // "YOLOv9-t", "YOLOX-s"
  int default_image_size = 640;
  std::shared_ptr<torch::nn::Module> module;
  std::function<std::vector<at::Tensor>(const at::Tensor&)> forward;  // per-level maps (eval mode: as decode takes them)
  std::function<std::vector<at::Tensor>(const at::Tensor&)> forward_raw;  // training-shaped maps in either mode (the loss's)
  // A network whose training forward takes the batch's targets (RT-DETR's denoising queries): its
  // training outputs, as the family's loss takes them. Empty: the YOLO heads, trained on forward's
  // (or forward_branch's) maps.
  std::function<std::vector<at::Tensor>(const at::Tensor&, const TargetBatch&)> forward_train;
  // What forward_train needs of the global batch in data-parallel training (the trainer fills it;
  // the closures above share it).
  std::shared_ptr<BatchShare> batch_share = std::make_shared<BatchShare>();
  // forward_train split where a CUDA graph's region ends (Family::graph_region() backbone_encoder):
  // `run` is the region (tensors in, tensors out), `modules` hold its parameters and buffers,
  // `rest` finishes the training forward from the input, the region's outputs and the targets.
  // forward_train(x, t) == rest(x, run(x), t). Empty `run`: forward_train has no such split.
  struct Region {
    std::vector<std::shared_ptr<torch::nn::Module>> modules;
    std::function<std::vector<at::Tensor>(const at::Tensor&)> run;
    std::function<std::vector<at::Tensor>(const at::Tensor&, const std::vector<at::Tensor>&, const TargetBatch&)> rest;
  } train_region;
  std::function<void()> fuse;                                          // for inference
  // A training-only branch (YOLOv9's PGI auxiliary branch; Family::trains_branch says when it
  // trains): enable_branch() attaches it, then forward_branch returns the maps the family's loss
  // takes with it (the main head's, then the branch's). Both empty where a family has none.
  std::function<void()> enable_branch;
  std::function<std::vector<at::Tensor>(const at::Tensor&)> forward_branch;
};

// Throws ModelError for an unknown family or size. Weights files go through load_model (checkpoint.h).
// `class_hidden`: YOLOv9's class-tower width (0 = max(ch0, min(nc, 100))); YOLOX ignores it.
// `fine_tune`: the family's form for training from weights (Family::fine_tune_form).
Model build_model(const ModelName& name, int class_count, int class_hidden = 0, bool fine_tune = false);

// Stores every 4-D parameter and buffer (the convolution weights) channels-last (NHWC), in place:
// oneDNN's CPU convolutions, and cuDNN's under AMP, run faster on that layout. Values, names and
// shapes are unchanged; checkpoints are written contiguous whatever the layout.
void to_channels_last(torch::nn::Module& module);

struct ModelSummary {
  std::int64_t layers = 0;      // modules, as Ultralytics counts them
  std::int64_t parameters = 0;
  std::int64_t gradients = 0;   // parameters that require grad
  double gflops = 0;            // one image at the given size, thop's convention (see model_gflops)
};

ModelSummary summarize(const Model& model, int image_height, int image_width);

// GFLOPs of what `run` executes on this thread, as thop (and the YOLOX README) count them:
// 2 x (convolution multiply-adds + one add per biased output + 2 per BatchNorm element).
double model_gflops(const std::function<void()>& run);

}  // namespace libreyolo::models
