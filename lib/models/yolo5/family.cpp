// YOLOv5 behind the Family interface (models/family.h): its network, decoder and recipe.
#include "models/family.h"

#include "core/error.h"
#include "models/yolo5/autoanchor.h"
#include "models/yolo5/loss.h"
#include "models/yolo5/model.h"
#include "models/yolo5/recipe.h"
#include "nn/gelan.h"
#include "models/yolo_common/anchor_decode.h"
#include "models/yolo_common/ultralytics_pipeline.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

namespace libreyolo::models::yolo5 {

namespace {

class Yolov5Loss final : public TrainingLoss {
 public:
  explicit Yolov5Loss(const LossOptions& options) : options_(options) {}
  LossTerms operator()(const std::vector<at::Tensor>& maps, const TargetBatch& targets) const override {
    return yolo5::loss(maps, targets, options_);
  }
  std::string capture_obstacle() const override { return "its anchor matching has data-dependent shapes"; }

 private:
  LossOptions options_;
};

class Yolov5Family final : public Family {
 public:
  std::string_view name() const override { return "yolov5"; }
  std::string_view weights_prefix() const override { return "LibreYOLOv5"; }
  std::vector<std::string> sizes() const override { return {"n", "s", "m", "l", "x"}; }
  models::Model build(const std::string& size, int class_count, int, bool) const override {
    yolo5::Model net(size, class_count);
    models::Model model;
    model.display_name = fmt::format("YOLOv5{}", size);
    model.default_image_size = 640;
    model.module = net.ptr();
    model.forward = [net](const at::Tensor& x) mutable { return net->forward(x); };
    model.forward_raw = model.forward;  // the same maps in both modes: the decoder applies the sigmoid
    model.fuse = [net]() mutable { nn::fuse_for_inference(*net); };
    return model;
  }
  // yolov5's freeze=N: the first N of its 25 layers.
  std::vector<std::string> freeze_groups(bool) const override {
    std::vector<std::string> groups;
    for (int i = 0; i < 25; ++i) groups.push_back(fmt::format("model.{}.", i));
    return groups;
  }
  bool recognises_key(std::string_view name) const override { return name == "model.24.anchors"; }
  at::Tensor network_input(const at::Tensor& images, const c10::Device& device) const override {
    return images.to(device, /*non_blocking=*/true).to(at::kFloat).div_(255.0);  // RGB, 0-1
  }
  Decoded decode(const std::vector<at::Tensor>& maps) const override {
    return decode_yolov5(maps, {kStrides.begin(), kStrides.end()});  // float maps: the validator's detect() converts them
  }
  std::string fit_to_labels(torch::nn::Module& model, const data::DetectionDataset& dataset, int image_size,
                            const config::Config& config) const override {
    std::string line;
    auto buffers = model.named_buffers();  // find() points into this dictionary: it must outlive the check
    if (at::Tensor* anchors = buffers.find("model.24.anchors"); anchors && config.get_bool("autoanchor")) {
      line = check_anchors(*anchors, dataset, image_size, config.get_real("anchor_t"), static_cast<std::uint64_t>(config.get_int("seed")));
    }
    // train.py's model.half().float() after the check, AutoAnchor on or off: every parameter and
    // buffer starts at float16's precision
    round_to_half(model);
    return line;
  }
  std::vector<std::string> loss_names() const override { return {"box_loss", "obj_loss", "cls_loss"}; }
  std::unique_ptr<TrainingLoss> make_loss(const LossContext& context, const config::Config& config) const override {
    LossOptions options = scaled_gains(config.get_real("box"), config.get_real("obj"), config.get_real("cls"),
                                       static_cast<int>(context.classes), context.image_size);
    options.anchor_t = config.get_real("anchor_t");
    options.world_size = context.world_size;
    options.global_normaliser = context.global_normaliser;
    return std::make_unique<Yolov5Loss>(options);
  }
  // Measured (bench/yolo_step, 2-core AMD EPYC, medians of 3 interleaved): a step 1.18x faster for
  // yolov5n and 1.14x for yolov5s at 320 px, batch 8, channels-last
  bool channels_last_on_cpu() const override { return true; }
  bool warms_up_momentum() const override { return true; }
  bool ramps_nominal_batch() const override { return true; }
  std::shared_ptr<const data::SamplePipeline> sample_pipeline() const override { return yolo_common::ultralytics_pipeline(/*yolov5_mosaic=*/true); }
  std::span<const config::OptionSpec> options() const override { return option_keys(); }
  std::vector<config::OptionDefault> option_defaults(const std::string& size) const override {
    return yolo5::option_defaults(size);
  }
};

}  // namespace

const Family& family() {
  static const Yolov5Family instance;
  return instance;
}

}  // namespace libreyolo::models::yolo5
