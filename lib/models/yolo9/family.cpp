// YOLOv9 behind the Family interface (models/family.h): its network, loss, postprocess and recipe.
#include "models/family.h"

#include "models/yolo9/loss.h"
#include "models/yolo9/model.h"
#include "models/yolo9/recipe.h"
#include "models/yolo9/decode.h"
#include "models/yolo_common/ultralytics_pipeline.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

namespace libreyolo::models::yolo9 {

namespace {

class Yolo9Loss final : public TrainingLoss {
 public:
  Yolo9Loss(const LossContext& context, const config::Config& config)
      : aux_weight_(context.training_branch ? config.get_real("aux_weight") : 0.0), branch_(context.training_branch) {
    options_.box_gain = config.get_real("box");
    options_.cls_gain = config.get_real("cls");
    options_.dfl_gain = config.get_real("dfl");
    options_.global_normaliser = context.global_normaliser;
  }
  // With the PGI branch: the main head's maps, then the branch's; every term is main + aux_weight x aux (LibreYOLO's).
  LossTerms operator()(const std::vector<at::Tensor>& outputs, const TargetBatch& targets) const override {
    if (!branch_) return yolo9::loss(outputs, targets, options_);
    const auto half = static_cast<std::ptrdiff_t>(outputs.size() / 2);
    const std::vector<at::Tensor> maps(outputs.begin(), outputs.begin() + half), aux_maps(outputs.begin() + half, outputs.end());
    LossTerms terms = yolo9::loss(maps, targets, options_);
    const LossTerms aux_terms = yolo9::loss(aux_maps, targets, options_);
    terms.total = terms.total + aux_weight_ * aux_terms.total;
    for (auto& [name, value] : terms.parts) value = value + aux_weight_ * aux_terms.part(name);
    return terms;
  }
  std::string capture_obstacle() const override {  // TAL is dense over [B, G, anchors]
    return options_.global_normaliser ? "its data-parallel normaliser is a collective" : "";
  }
  void use_static_shapes() override { options_.dense = true; }

 private:
  yolo9::LossOptions options_;
  double aux_weight_;
  bool branch_;
};

class Yolo9Family final : public Family {
 public:
  std::string_view name() const override { return "yolo9"; }
  std::string_view weights_prefix() const override { return "LibreYOLO9"; }
  std::vector<std::string> sizes() const override { return {"t", "s", "m", "c"}; }
  models::Model build(const std::string& size, int class_count, int class_hidden, bool) const override {
    yolo9::Model net(size, class_count, class_hidden);
    models::Model model;
    model.display_name = fmt::format("YOLOv9-{}", size);
    model.module = net.ptr();
    model.forward = [net](const at::Tensor& x) mutable { return net->forward(x); };
    model.forward_raw = model.forward;  // DDetect's maps are raw in both modes
    model.fuse = [net]() mutable { net->fuse(); };
    model.enable_branch = [net]() mutable { net->enable_aux(); };
    model.forward_branch = [net](const at::Tensor& x) mutable {
      auto [maps, aux_maps] = net->forward_with_aux(x);
      maps.insert(maps.end(), aux_maps.begin(), aux_maps.end());
      return maps;
    };
    return model;
  }
  int named_class_hidden(const std::string& size) const override { return yolo9::class_tower_width(size, 80); }
  int class_hidden_of(const std::map<std::string, at::Tensor>& tensors) const override {
    const auto tower = tensors.find("head.cv3.0.0.conv.weight");
    return tower == tensors.end() ? 0 : static_cast<int>(tower->second.size(0));
  }
  bool is_training_only_tensor(std::string_view name) const override { return yolo9::is_aux_tensor(name); }
  std::string_view training_only_branch() const override { return "the PGI auxiliary branch (aux.*, aux_head.*)"; }
  bool trains_branch(const config::Config& config) const override { return config.get_real("aux_weight") > 0; }
  std::vector<std::string> freeze_groups(bool with_aux) const override {  // LibreYOLO's YOLOv9 trainer's groups
    std::vector<std::string> groups;
    for (const char* m : {"conv0", "conv1", "elan1", "down2", "elan2", "down3", "elan3", "down4", "elan4", "spp"}) {
      groups.push_back(fmt::format("backbone.{}.", m));
    }
    for (const char* m : {"elan_up1", "elan_up2", "down1", "elan_down1", "down2", "elan_down2"}) groups.push_back(fmt::format("neck.{}.", m));
    groups.emplace_back("head.");
    if (with_aux) groups.insert(groups.end(), {"aux.", "aux_head."});
    return groups;
  }
  bool recognises_key(std::string_view name) const override {
    return name.starts_with("backbone.elan") || name.starts_with("head.cv2");
  }
  at::Tensor network_input(const at::Tensor& images, const c10::Device& device) const override {
    return images.to(device, /*non_blocking=*/true).to(at::kFloat).div_(255.0);  // RGB, 0-1
  }
  Decoded decode(const std::vector<at::Tensor>& maps) const override {
    return decode_yolo9(maps, yolo9::kRegMax, {8, 16, 32});
  }
  std::vector<std::string> loss_names() const override { return {"box_loss", "cls_loss", "dfl_loss"}; }
  std::unique_ptr<TrainingLoss> make_loss(const LossContext& context, const config::Config& config) const override {
    return std::make_unique<Yolo9Loss>(context, config);
  }
  bool channels_last_on_cpu() const override { return true; }
  bool warms_up_momentum() const override { return true; }
  std::shared_ptr<const data::SamplePipeline> sample_pipeline() const override { return yolo_common::ultralytics_pipeline(/*yolov5_mosaic=*/false); }
  std::span<const config::OptionSpec> options() const override { return option_keys(); }
  std::vector<config::OptionDefault> option_defaults(const std::string& size) const override {
    return yolo9::option_defaults(size);
  }
};

}  // namespace

const Family& family() {
  static const Yolo9Family instance;
  return instance;
}

}  // namespace libreyolo::models::yolo9
