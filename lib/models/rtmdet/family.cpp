// RTMDet behind the Family interface (models/family.h): its network, decoder, loss and recipe.
#include "models/family.h"

#include "core/error.h"

#include "models/rtmdet/loss.h"
#include "models/rtmdet/model.h"
#include "models/rtmdet/recipe.h"
#include "nn/gelan.h"
#include "models/yolo_common/yolox_pipeline.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <map>
#include <regex>

namespace libreyolo::models::rtmdet {

namespace {

class RtmdetLoss final : public TrainingLoss {
 public:
  explicit RtmdetLoss(const LossContext& context) { options_.global_normaliser = context.global_normaliser; }
  LossTerms operator()(const std::vector<at::Tensor>& maps, const TargetBatch& targets) const override {
    return rtmdet::loss(maps, targets, options_);
  }
  std::string capture_obstacle() const override { return "the dynamic soft-label assignment has data-dependent shapes"; }

 private:
  rtmdet::LossOptions options_;
};

class RtmdetFamily final : public Family {
 public:
  std::string_view name() const override { return "rtmdet"; }
  std::string_view weights_prefix() const override { return "LibreRTMDet"; }
  std::vector<std::string> sizes() const override { return {"t", "s", "m", "l", "x"}; }
  models::Model build(const std::string& size, int class_count, int, bool) const override {
    rtmdet::Model net(size, class_count);
    models::Model model;
    model.display_name = fmt::format("RTMDet-{}", size);
    model.default_image_size = 640;
    model.module = net.ptr();
    model.forward = [net](const at::Tensor& x) mutable { return net->forward(x); };
    model.forward_raw = model.forward;  // the same maps in both modes: the decoder applies the sigmoid
    model.fuse = [net]() mutable { nn::fuse_for_inference(*net); };
    return model;
  }
  void normalise_tensors(std::map<std::string, at::Tensor>& tensors) const override {
    static const std::regex shared(R"(head\.(cls|reg)_convs\.[12]\.([01])\.conv\.weight)");
    for (auto it = tensors.begin(); it != tensors.end();) {
      std::smatch m;
      if (!std::regex_match(it->first, m, shared)) {
        ++it;
        continue;
      }
      const auto owner = tensors.find(fmt::format("head.{}_convs.0.{}.conv.weight", m[1].str(), m[2].str()));
      if (owner == tensors.end() || !owner->second.equal(it->second)) {
        throw ModelError(fmt::format("{} differs from level 0's convolution, which RTMDet's head shares across levels", it->first));
      }
      it = tensors.erase(it);
    }
  }
  // LibreYOLO's default groups: the model's direct children.
  std::vector<std::string> freeze_groups(bool) const override { return {"backbone.", "neck.", "head."}; }
  bool recognises_key(std::string_view name) const override { return name.starts_with("head.rtm_cls."); }
  at::Tensor network_input(const at::Tensor& images, const c10::Device& device) const override {
    // BGR, mmdetection's mean and standard deviation (in BGR order), not divided by 255
    const auto options = at::TensorOptions().dtype(at::kFloat).device(device);
    const at::Tensor mean = at::tensor({103.53, 116.28, 123.675}, at::kFloat).view({1, 3, 1, 1}).to(options);
    const at::Tensor std = at::tensor({57.375, 57.12, 58.395}, at::kFloat).view({1, 3, 1, 1}).to(options);
    return images.to(device, /*non_blocking=*/true).flip(1).to(at::kFloat).sub_(mean).div_(std);
  }
  Decoded decode(const std::vector<at::Tensor>& maps) const override { return rtmdet::decode(maps); }
  std::vector<std::string> loss_names() const override { return {"cls_loss", "bbox_loss"}; }
  std::unique_ptr<TrainingLoss> make_loss(const LossContext& context, const config::Config&) const override { return std::make_unique<RtmdetLoss>(context); }
  // Channels-last measured a 1.07-1.14x step (bench/yolo_step, 2-core AMD EPYC, 320 px, batch 8);
  // contiguous until its training is checked in that layout (YOLOv7-b's turned NaN in it)
  bool channels_last_on_cpu() const override { return false; }
  bool warms_up_momentum() const override { return false; }
  std::shared_ptr<const data::SamplePipeline> sample_pipeline() const override { return yolo_common::yolox_pipeline(); }  // YOLOX's mosaic-mixup pipeline
  // validated and predicted as trained (without mosaic, TrainTransform places images top-left) and
  // as LibreYOLO validates it
  data::InputFit input_fit() const override { return data::InputFit::letterbox_top_left; }
  std::vector<config::OptionDefault> option_defaults(const std::string& size) const override {
    return rtmdet::option_defaults(size);
  }
};

}  // namespace

const Family& family() {
  static const RtmdetFamily instance;
  return instance;
}

}  // namespace libreyolo::models::rtmdet
