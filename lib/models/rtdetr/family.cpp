#include "models/detr_common/family_parts.h"
#include "models/family.h"

#include "core/error.h"
#include "core/step_part.h"
#include "models/detr_common/denoising.h"
#include "models/detr_common/postprocess.h"
#include "models/rtdetr/model.h"
#include "models/rtdetr/recipe.h"
#include "models/rtdetr/pipeline.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <algorithm>
#include <fmt/format.h>

namespace libreyolo::models::detr {

namespace {

class RtdetrLoss final : public TrainingLoss {
 public:
  RtdetrLoss(std::int64_t classes, const GlobalNormaliser& normaliser) : normaliser_(normaliser) { options_.classes = classes; }
  LossTerms operator()(const std::vector<at::Tensor>& maps, const TargetBatch& targets) const override {
    const StepPart part("loss");  // a named phase in the profiler (its matcher's included)
    const PackedOutputs packed = unpack_outputs(maps);
    return detr_loss(packed.outputs, detr_targets(targets, packed.width, packed.height), options_, normaliser_);
  }
  std::string capture_obstacle() const override { return "the Hungarian matcher runs on the host"; }

 private:
  CriterionOptions options_;
  GlobalNormaliser normaliser_;
};

class RtdetrFamily final : public Family {
 public:
  std::string_view name() const override { return "rtdetr"; }
  std::string_view weights_prefix() const override { return "LibreRTDETR"; }
  std::vector<std::string> sizes() const override { return {"r18", "r34", "r50", "r50m", "r101", "l", "x"}; }
  // From scratch the backbone's norms train and nothing is frozen; from weights (LibreYOLO's
  // non-scratch build) the stem is frozen, and r50 and up freeze the backbone's BatchNorm layers.
  models::Model build(const std::string& size, int class_count, int, bool fine_tune) const override {
    RtdetrModel net(RtdetrOptions{.size = size, .classes = class_count, .queries = kQueries, .scratch = !fine_tune});
    models::Model model;
    model.display_name = fmt::format("RT-DETR-{}", size);
    model.module = net.ptr();
    model.forward = [net](const at::Tensor& x) mutable {
      const DetrOutputs out = net->forward(x);
      return std::vector<at::Tensor>{out.last.logits, out.last.boxes};
    };
    model.forward_raw = [net](const at::Tensor& x) mutable { return pack_outputs(net->forward(x), x.size(3), x.size(2)); };
    const auto denoising = [class_count, share = model.batch_share](const at::Tensor& x, const TargetBatch& targets) {
      return batch_denoising(x, targets, class_count, kQueries, /*mirror_negative=*/false, *share);
    };
    model.forward_train = [net, denoising](const at::Tensor& x, const TargetBatch& targets) mutable {
      const DenoisingQueries queries = denoising(x, targets);
      return pack_outputs(net->forward(x, &queries), x.size(3), x.size(2));
    };
    model.train_region = {.modules = net->encode_modules(),
                          .run = [net](const at::Tensor& x) mutable { return net->encode(x); },
                          .rest = [net, denoising](const at::Tensor& x, const std::vector<at::Tensor>& features,
                                                   const TargetBatch& targets) mutable {
                            const DenoisingQueries queries = denoising(x, targets);
                            return pack_outputs(net->decode(features, &queries), x.size(3), x.size(2));
                          }};
    model.fuse = [] {};
    return model;
  }
  std::string input_size_obstacle(const std::string& size, int image_size) const override {
    return query_positions_obstacle(fmt::format("RT-DETR-{}", size), {8, 16, 32}, image_size, kQueries);
  }
  std::string fine_tune_form(const std::string& size) const override {
    return rtdetr_config(size).frozen_norm ? "the backbone's stem and BatchNorm layers frozen" : "the backbone's stem frozen";
  }
  // LibreYOLO's r50, r50m, r101, l and x trained from weights hold frozen backbone norms: their
  // buffers without num_batches_tracked
  bool written_in_fine_tune_form(const std::string& size, const std::map<std::string, at::Tensor>& tensors) const override {
    return rtdetr_config(size).frozen_norm && holds_frozen_backbone_norms(tensors);
  }
  std::vector<std::string> freeze_groups(bool) const override { return {"backbone.", "encoder.", "decoder."}; }
  bool recognises_key(std::string_view name) const override {
    return name.starts_with("decoder.dec_score_head") || name.starts_with("encoder.input_proj");
  }
  at::Tensor network_input(const at::Tensor& images, const c10::Device& device) const override {
    return images.to(device, /*non_blocking=*/true).to(at::kFloat).div_(255.0);  // RGB, 0-1
  }
  Decoded decode(const std::vector<at::Tensor>&) const override {
    throw RuntimeError("RT-DETR's outputs are not decoded for NMS: its detections are the top-k queries (detections())");
  }
  std::vector<at::Tensor> eval_maps(std::vector<at::Tensor> raw) const override {
    const PackedOutputs packed = unpack_outputs(raw);
    return {packed.outputs.last.logits, packed.outputs.last.boxes};
  }
  std::optional<std::vector<at::Tensor>> detections(const std::vector<at::Tensor>& maps, std::int64_t width, std::int64_t height,
                                                    double confidence, int max_detections) const override {
    const std::vector<std::pair<double, double>> sizes(static_cast<std::size_t>(maps.at(0).size(0)),
                                                       {static_cast<double>(width), static_cast<double>(height)});
    return top_detections(maps.at(0).to(at::kFloat), maps.at(1).to(at::kFloat), sizes, confidence, max_detections);
  }
  data::InputFit input_fit() const override { return data::InputFit::stretch; }
  double validation_confidence() const override { return 0.0; }
  GraphRegion graph_region() const override { return GraphRegion::backbone_encoder; }
  bool may_leave_parameters_unused() const override { return true; }  // denoising_class_embed without targets
  ParameterRules parameter_rules(const config::Config& config) const override {
    const double lr0 = config.get_real("lr0"), backbone = config.get_real("lr_backbone");
    return rtdetr_parameter_rules(backbone > 0 && lr0 > 0 ? backbone / lr0 : 1.0);
  }
  std::vector<std::string> loss_names() const override { return {"vfl_loss", "bbox_loss", "giou_loss"}; }  // LibreYOLO's
  std::unique_ptr<TrainingLoss> make_loss(const LossContext& context, const config::Config&) const override {
    return std::make_unique<RtdetrLoss>(context.classes, context.global_normaliser);
  }
  bool channels_last_on_cpu() const override { return false; }
  bool warms_up_momentum() const override { return false; }
  std::shared_ptr<const data::SamplePipeline> sample_pipeline() const override { return rtdetr::sample_pipeline(); }
  std::span<const config::OptionSpec> options() const override { return rtdetr_option_keys(); }
  std::vector<config::OptionDefault> option_defaults(const std::string& size) const override {
    return rtdetr_option_defaults(size);
  }

 private:
  static constexpr int kQueries = 300;
};

}  // namespace

}  // namespace libreyolo::models::detr

namespace libreyolo::models::rtdetr {

const Family& family() {
  static const detr::RtdetrFamily instance;
  return instance;
}

}  // namespace libreyolo::models::rtdetr
