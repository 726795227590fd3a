#include "models/yolo9/family.h"

#include "models/yolo9/loss.h"
#include "models/yolo9/model.h"
#include "models/yolo9/recipe.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

namespace libreyolo::models::yolo9 {

namespace {

class Yolo9Loss final : public TrainingLoss {
 public:
  explicit Yolo9Loss(const LossGains& gains) {
    options_.box_gain = gains.box;
    options_.cls_gain = gains.cls;
    options_.dfl_gain = gains.dfl;
    options_.global_normaliser = gains.global_normaliser;
  }
  LossTerms operator()(const std::vector<at::Tensor>& maps, const TargetBatch& targets) const override {
    return yolo9::loss(maps, targets, options_);
  }
  std::string capture_obstacle() const override {  // TAL is dense over [B, G, anchors]
    return options_.global_normaliser ? "its data-parallel normaliser is a collective" : "";
  }
  void use_static_shapes() override { options_.dense = true; }

 private:
  yolo9::LossOptions options_;
};

class Yolo9Family final : public Family {
 public:
  std::string_view name() const override { return "yolo9"; }
  DetectionModel build(const std::string& size, int class_count, int class_hidden, bool) const override {
    yolo9::Model net(size, class_count, class_hidden);
    DetectionModel model;
    model.display_name = fmt::format("YOLOv9-{}", size);
    model.module = net.ptr();
    model.forward = [net](const at::Tensor& x) mutable { return net->forward(x); };
    model.forward_raw = model.forward;  // DDetect's maps are raw in both modes
    model.fuse = [net]() mutable { net->fuse(); };
    model.enable_aux = [net]() mutable { net->enable_aux(); };
    model.forward_aux = [net](const at::Tensor& x) mutable { return net->forward_with_aux(x); };
    return model;
  }
  int named_class_hidden(const std::string& size) const override { return yolo9::class_tower_width(size, 80); }
  int class_hidden_of(const std::map<std::string, at::Tensor>& tensors) const override {
    const auto tower = tensors.find("head.cv3.0.0.conv.weight");
    return tower == tensors.end() ? 0 : static_cast<int>(tower->second.size(0));
  }
  bool is_training_only_tensor(std::string_view name) const override { return yolo9::is_aux_tensor(name); }
  std::string_view training_only_branch() const override { return "the PGI auxiliary branch (aux.*, aux_head.*)"; }
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
  std::unique_ptr<TrainingLoss> make_loss(const LossGains& gains) const override { return std::make_unique<Yolo9Loss>(gains); }
  bool channels_last_on_cpu() const override { return true; }
  bool warms_up_momentum() const override { return true; }
  data::Recipe augment_recipe() const override { return data::Recipe::yolo9; }
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
