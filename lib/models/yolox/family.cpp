// YOLOX behind the Family interface (models/family.h): its network, loss, postprocess and recipe.
#include "models/family.h"

#include "models/yolox/loss.h"
#include "models/yolox/model.h"
#include "models/yolo_common/yolox_config.h"
#include "nn/gelan.h"
#include "models/yolox/decode.h"
#include "models/yolo_common/yolox_pipeline.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

namespace libreyolo::models::yolox {

namespace {

class YoloxLoss final : public TrainingLoss {
 public:
  explicit YoloxLoss(const LossContext& context) { options_.global_normaliser = context.global_normaliser; }
  LossTerms operator()(const std::vector<at::Tensor>& maps, const TargetBatch& targets) const override {
    return yolox::loss(maps, targets, options_);
  }
  std::string close_augmentation() override {
    options_.use_l1 = true;
    return "L1 loss on";
  }
  std::string capture_obstacle() const override { return "SimOTA's dynamic-k assignment has data-dependent shapes"; }

 private:
  yolo_common::SimOtaLossOptions options_;
};

class YoloxFamily final : public Family {
 public:
  std::string_view name() const override { return "yolox"; }
  std::string_view weights_prefix() const override { return "LibreYOLOX"; }
  std::vector<std::string> sizes() const override { return {"n", "t", "s", "m", "l", "x"}; }
  models::Model build(const std::string& size, int class_count, int, bool) const override {
    yolox::Model net(size, class_count);
    models::Model model;
    model.display_name = fmt::format("YOLOX-{}", size);
    model.default_image_size = net->spec().input_size;
    model.module = net.ptr();
    model.forward = [net](const at::Tensor& x) mutable { return net->forward(x); };
    model.forward_raw = [net](const at::Tensor& x) mutable { return net->forward_raw(x); };
    model.fuse = [net]() mutable { nn::fuse_for_inference(*net); };
    return model;
  }
  // LibreYOLO's default groups: the model's direct children that hold parameters.
  std::vector<std::string> freeze_groups(bool) const override { return {"backbone.", "head."}; }
  bool recognises_key(std::string_view name) const override {
    return name.starts_with("backbone.backbone.dark") || name.starts_with("head.obj_preds");
  }
  at::Tensor network_input(const at::Tensor& images, const c10::Device& device) const override {
    return images.to(device, /*non_blocking=*/true).to(at::kFloat).flip(1);  // BGR, 0-255, as upstream
  }
  Decoded decode(const std::vector<at::Tensor>& maps) const override { return decode_yolox(maps, {8, 16, 32}); }
  std::vector<at::Tensor> eval_maps(std::vector<at::Tensor> raw) const override {
    for (auto& map : raw) map = at::cat({map.slice(1, 0, 4), map.slice(1, 4).sigmoid()}, 1);  // as the head's eval branch
    return raw;
  }
  std::vector<std::string> loss_names() const override { return {"iou_loss", "obj_loss", "cls_loss", "l1_loss"}; }
  std::unique_ptr<TrainingLoss> make_loss(const LossContext& context, const config::Config&) const override { return std::make_unique<YoloxLoss>(context); }
  bool channels_last_on_cpu() const override { return false; }
  bool warms_up_momentum() const override { return false; }
  std::shared_ptr<const data::SamplePipeline> sample_pipeline() const override { return yolo_common::yolox_pipeline(); }
  // validated and predicted as trained (without mosaic, TrainTransform places images top-left) and
  // as LibreYOLO validates it
  data::InputFit input_fit() const override { return data::InputFit::letterbox_top_left; }
  // LibreYOLO's YOLOX validation keeps each box's best class
  bool single_label_validation() const override { return true; }
  std::vector<config::OptionDefault> option_defaults(const std::string& size) const override {
    return yolo_common::yolox_config_defaults(size);
  }
};

}  // namespace

const Family& family() {
  static const YoloxFamily instance;
  return instance;
}

}  // namespace libreyolo::models::yolox
