// YOLOv7-b behind the Family interface (models/family.h): its network, decoder, loss and recipe.
#include "models/family.h"

#include "core/error.h"
#include "models/yolo7/loss.h"
#include "models/yolo7/model.h"
#include "models/yolo7/recipe.h"
#include "nn/gelan.h"
#include "models/yolo_common/anchor_decode.h"
#include "models/yolo_common/yolox_pipeline.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

namespace libreyolo::models::yolo7 {

namespace {

class Yolo7Loss final : public TrainingLoss {
 public:
  explicit Yolo7Loss(const LossContext& context) { options_.global_normaliser = context.global_normaliser; }
  LossTerms operator()(const std::vector<at::Tensor>& maps, const TargetBatch& targets) const override {
    return yolo7::loss(maps, targets, options_);
  }
  std::string capture_obstacle() const override { return "SimOTA's dynamic-k assignment has data-dependent shapes"; }

 private:
  yolo7::LossOptions options_;
};

class Yolo7Family final : public Family {
 public:
  std::string_view name() const override { return "yolo7"; }
  std::string_view weights_prefix() const override { return "LibreYOLO7"; }
  std::vector<std::string> sizes() const override { return {"b"}; }
  models::Model build(const std::string& size, int class_count, int, bool) const override {
    if (size != "b") throw ModelError(fmt::format("yolo7-{}: unknown size; YOLOv7 has one size, b", size));
    yolo7::Model net(class_count);
    models::Model model;
    model.display_name = "YOLOv7-b";
    model.default_image_size = kInputSize;
    model.module = net.ptr();
    model.forward = [net](const at::Tensor& x) mutable { return net->forward(x); };
    model.forward_raw = model.forward;  // the same maps in both modes: the decoder applies the sigmoid
    model.fuse = [net]() mutable { nn::fuse_for_inference(*net); };
    return model;
  }
  // LibreYOLO's default groups: the model's direct children that hold parameters (one: layers).
  std::vector<std::string> freeze_groups(bool) const override { return {"layers."}; }
  bool recognises_key(std::string_view name) const override { return name.starts_with("layers.105.heads."); }
  at::Tensor network_input(const at::Tensor& images, const c10::Device& device) const override {
    return images.to(device, /*non_blocking=*/true).to(at::kFloat).div_(255.0);  // RGB, 0-1
  }
  Decoded decode(const std::vector<at::Tensor>& maps) const override {
    std::vector<at::Tensor> with_anchors(maps.begin(), maps.end());
    with_anchors.push_back(grid_anchors(maps.front().options()));
    return decode_yolov5(with_anchors, {kStrides.begin(), kStrides.end()});  // the same decoding as YOLOv5's
  }
  std::vector<std::string> loss_names() const override { return {"iou_loss", "obj_loss", "cls_loss"}; }
  std::unique_ptr<TrainingLoss> make_loss(const LossContext& context, const config::Config&) const override { return std::make_unique<Yolo7Loss>(context); }
  // Channels-last measured a 1.4x step (bench/yolo_step, 2-core AMD EPYC, 320 px, batch 8), but
  // the coco8 over-fit (slow_overfit_coco8_yolo7-b, seed 0) diverges in that layout: objectness
  // logits grow (obj_loss 29 at epoch 3, 951 at 7) until the weights reach 1e10 by epoch 8; seeds 1
  // and 2 train, the layout's gradients equal the contiguous ones on that run's weights to 1e-4, and
  // with ATen's BatchNorm instead of ours it trains too: an instability of this recipe (lr 0.01,
  // batch 2, no clipping) that the layout's rounding sets off, kept contiguous until understood.
  bool channels_last_on_cpu() const override { return false; }
  bool warms_up_momentum() const override { return false; }
  // YOLOv9's transform classes with YOLOX's settings (libreyolo 1.6.0): YOLOX's mosaic, affine and
  // additive HSV; the input in RGB / 255
  std::shared_ptr<const data::SamplePipeline> sample_pipeline() const override { return yolo_common::yolox_pipeline(); }
  // validated and predicted as trained (without mosaic, TrainTransform places images top-left) and
  // as LibreYOLO validates it
  data::InputFit input_fit() const override { return data::InputFit::letterbox_top_left; }
  bool single_label_validation() const override { return true; }  // LibreYOLO's postprocess: the best class
  std::vector<config::OptionDefault> option_defaults(const std::string& size) const override {
    return yolo7::option_defaults(size);
  }
};

}  // namespace

const Family& family() {
  static const Yolo7Family instance;
  return instance;
}

}  // namespace libreyolo::models::yolo7
