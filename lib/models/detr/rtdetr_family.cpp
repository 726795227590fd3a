#include "models/detr/rtdetr_family.h"

#include "core/error.h"
#include "core/step_part.h"
#include "models/detr/denoising.h"
#include "models/detr/postprocess.h"
#include "models/detr/rtdetr_model.h"
#include "models/detr/rtdetr_recipe.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <algorithm>
#include <fmt/format.h>

namespace libreyolo::models::detr {

std::vector<at::Tensor> pack_outputs(const DetrOutputs& outputs, std::int64_t width, std::int64_t height) {
  const auto images = outputs.last.logits.size(0);
  const bool denoising = !outputs.denoising.empty();
  std::vector<at::Tensor> packed{at::tensor({static_cast<std::int64_t>(outputs.auxiliary.size()),
                                             static_cast<std::int64_t>(outputs.denoising.size()),
                                             outputs.denoising_match.groups, denoising ? images : 0, width, height},
                                            at::kLong),
                                 outputs.last.logits, outputs.last.boxes};
  for (const auto* levels : {&outputs.auxiliary, &outputs.denoising}) {
    for (const DetrLevel& level : *levels) packed.insert(packed.end(), {level.logits, level.boxes});
  }
  if (denoising) {
    packed.insert(packed.end(), outputs.denoising_match.positive_queries.begin(), outputs.denoising_match.positive_queries.end());
  }
  return packed;
}

PackedOutputs unpack_outputs(const std::vector<at::Tensor>& packed) {
  if (packed.size() < 3 || packed[0].scalar_type() != at::kLong || packed[0].numel() != 6) {
    throw RuntimeError("RT-DETR outputs: not the packed form pack_outputs writes");
  }
  const auto header = packed[0].contiguous();
  const std::int64_t* h = header.data_ptr<std::int64_t>();
  const auto expected = 3 + 2 * (h[0] + h[1]) + h[3];
  if (static_cast<std::int64_t>(packed.size()) != expected) {
    throw RuntimeError(fmt::format("RT-DETR outputs: {} tensors where the header says {}", packed.size(), expected));
  }
  PackedOutputs out;
  out.width = h[4];
  out.height = h[5];
  out.outputs.last = {packed[1], packed[2]};
  std::size_t next = 3;
  for (std::int64_t i = 0; i < h[0]; ++i, next += 2) out.outputs.auxiliary.push_back({packed[next], packed[next + 1]});
  for (std::int64_t i = 0; i < h[1]; ++i, next += 2) out.outputs.denoising.push_back({packed[next], packed[next + 1]});
  out.outputs.denoising_match.groups = h[2];
  for (std::int64_t i = 0; i < h[3]; ++i) out.outputs.denoising_match.positive_queries.push_back(packed[next++]);
  return out;
}

DetrTargets detr_targets(const TargetBatch& targets, std::int64_t width, std::int64_t height) {
  const at::Tensor valid = targets.valid;
  const at::Tensor scale =
      at::tensor({static_cast<float>(width), static_cast<float>(height), static_cast<float>(width), static_cast<float>(height)})
          .to(targets.boxes_cxcywh.device(), targets.boxes_cxcywh.scalar_type());
  DetrTargets out;
  out.classes = targets.classes.masked_select(valid);                             // image 0's slots first, in order
  out.boxes = targets.boxes_cxcywh.index({valid}).div(scale).clamp(0.0, 1.0);  // [T, 4] normalised
  const at::Tensor counts = valid.sum(1).cpu().contiguous();
  out.counts.assign(counts.data_ptr<std::int64_t>(), counts.data_ptr<std::int64_t>() + counts.numel());
  return out;
}

DenoisingQueries batch_denoising(const at::Tensor& x, const TargetBatch& targets, int classes, int queries, bool mirror_negative,
                                 const BatchShare& share) {
  const StepPart part("denoising");  // a named phase in the profiler
  const DetrTargets detr = detr_targets(targets, x.size(3), x.size(2));
  DenoisingOptions options{.classes = classes, .queries = queries, .mirror_negative = mirror_negative};
  if (share.global_max) {
    const std::int64_t most = detr.counts.empty() ? 0 : *std::max_element(detr.counts.begin(), detr.counts.end());
    options.most_targets = share.global_max(most);  // every rank, every step: a collective
  }
  const std::int64_t count = denoising_shape(detr.counts, options).first;
  const DenoisingNoise noise = draw_denoising_noise_share(static_cast<std::int64_t>(detr.counts.size()), count, classes,
                                                          at::detail::getDefaultCPUGenerator(), share.rank, share.world_size);
  return make_denoising_queries(detr, options, noise);
}

std::string query_positions_obstacle(const std::string& display, const std::vector<int>& strides, int image_size, int queries) {
  const auto positions = [&](int size) {
    std::int64_t total = 0;
    for (const int stride : strides) total += static_cast<std::int64_t>((size + stride - 1) / stride) * ((size + stride - 1) / stride);
    return total;
  };
  if (positions(image_size) >= queries) return {};
  int smallest = 32;
  while (positions(smallest) < queries) smallest += 32;
  return fmt::format("{} selects {} queries from its encoder's positions, but imgsz={} gives only {}: use imgsz={} or more",
                     display, queries, image_size, positions(image_size), smallest);
}

bool holds_frozen_backbone_norms(const std::map<std::string, at::Tensor>& tensors) {
  bool norms = false;
  for (const auto& [name, tensor] : tensors) {
    if (!name.starts_with("backbone.") || !name.ends_with(".running_var")) continue;
    norms = true;
    if (tensors.count(name.substr(0, name.size() - std::string_view("running_var").size()) + "num_batches_tracked")) return false;
  }
  return norms;
}

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
  // From scratch the backbone's norms train and nothing is frozen; from weights (LibreYOLO's
  // non-scratch build) the stem is frozen, and r50 and up freeze the backbone's BatchNorm layers.
  DetectionModel build(const std::string& size, int class_count, int, bool fine_tune) const override {
    RtdetrModel net(RtdetrOptions{.size = size, .classes = class_count, .queries = kQueries, .scratch = !fine_tune});
    DetectionModel model;
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
  std::unique_ptr<TrainingLoss> make_loss(const LossGains& gains) const override {
    return std::make_unique<RtdetrLoss>(gains.classes, gains.global_normaliser);
  }
  bool channels_last_on_cpu() const override { return false; }
  bool warms_up_momentum() const override { return false; }
  data::Recipe augment_recipe() const override { return data::Recipe::detr; }
  std::vector<config::OptionDefault> option_defaults(const std::string& size) const override {
    return rtdetr_option_defaults(size);
  }

 private:
  static constexpr int kQueries = 300;
};

}  // namespace

const Family& rtdetr_family() {
  static const RtdetrFamily instance;
  return instance;
}

}  // namespace libreyolo::models::detr
