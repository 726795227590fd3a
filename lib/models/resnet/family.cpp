// ResNet (18/34/50/101) behind the Family interface: libreyolo 1.6.0's classifier, task=classify.
#include "models/classify_common/classifier_family.h"
#include "models/resnet/model.h"

#include <fmt/format.h>

namespace libreyolo::models::resnet {

namespace {

class ResnetFamily final : public classify_common::ClassifierFamily {
 public:
  std::string_view name() const override { return "resnet"; }
  std::string_view weights_prefix() const override { return "LibreResNet"; }
  std::vector<std::string> sizes() const override {
    std::vector<std::string> out;
    for (const auto& spec : resnet::sizes()) out.emplace_back(spec.name);
    return out;
  }
  models::Model build(const std::string& size, int class_count, int, bool) const override {
    return classify_common::classifier_model(resnet::Model(size, class_count), fmt::format("ResNet-{}", size), 224);
  }
  // the network's children that hold parameters, in order
  std::vector<std::string> freeze_groups(bool) const override {
    return {"conv1.", "bn1.", "layer1.", "layer2.", "layer3.", "layer4.", "fc."};
  }
  // LibreYOLO's can_load: conv1.weight, fc.weight and layer1.0.conv1.weight at the top level
  bool recognises_key(std::string_view key) const override { return key == "layer1.0.conv1.weight"; }

 protected:
  std::vector<config::OptionDefault> size_defaults(const std::string&) const override {
    return {{"imgsz", "224"}, {"crop_pct", "0.95"}};
  }
};

}  // namespace

const Family& family() {
  static const ResnetFamily instance;
  return instance;
}

}  // namespace libreyolo::models::resnet
