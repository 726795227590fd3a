// MobileNetV4 conv (s/m/l) behind the Family interface: libreyolo 1.6.0's classifier, task=classify.
#include "models/classify_common/classifier_family.h"
#include "models/mobilenetv4/model.h"

#include <fmt/format.h>

namespace libreyolo::models::mobilenetv4 {

namespace {

class MobileNetV4Family final : public classify_common::ClassifierFamily {
 public:
  std::string_view name() const override { return "mobilenetv4"; }
  std::string_view weights_prefix() const override { return "LibreMobileNetV4"; }
  std::vector<std::string> sizes() const override {
    std::vector<std::string> out;
    for (const auto& spec : mobilenetv4::sizes()) out.emplace_back(spec.name);
    return out;
  }
  models::Model build(const std::string& size, int class_count, int, bool) const override {
    return classify_common::classifier_model(mobilenetv4::Model(size, class_count), fmt::format("MobileNetV4-{}", size),
                                             size_spec(size).image_size);
  }
  // the network's children that hold parameters, in order
  std::vector<std::string> freeze_groups(bool) const override {
    return {"conv_stem.", "bn1.", "blocks.", "conv_head.", "norm_head.", "classifier."};
  }
  // LibreYOLO's can_load: a key ending in .pw_exp.conv.weight (a universal inverted residual)
  bool recognises_key(std::string_view key) const override { return key.starts_with("blocks.") && key.ends_with(".pw_exp.conv.weight"); }

 protected:
  // size_spec()'s image_size and crop_pct, as option text
  std::vector<config::OptionDefault> size_defaults(const std::string& size) const override {
    if (size == "s") return {{"imgsz", "224"}, {"crop_pct", "0.875"}};
    if (size == "m") return {{"imgsz", "224"}, {"crop_pct", "0.95"}};
    return {{"imgsz", "256"}, {"crop_pct", "0.95"}};
  }
};

}  // namespace

const Family& family() {
  static const MobileNetV4Family instance;
  return instance;
}

}  // namespace libreyolo::models::mobilenetv4
