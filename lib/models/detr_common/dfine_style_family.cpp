#include "models/detr_common/dfine_style_family.h"

#include "core/error.h"
#include "core/step_part.h"
#include "models/detr_common/dfine_criterion.h"
#include "models/detr_common/dfine_model.h"
#include "models/detr_common/dfine_style_recipe.h"
#include "models/detr_common/family_parts.h"
#include "models/detr_common/postprocess.h"
#include "models/detr_common/family_parts.h"
#include "models/detr_common/dfine_pipeline.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <map>

namespace libreyolo::models::detr {

std::vector<at::Tensor> pack_dfine_outputs(const DfineOutputs& outputs, std::int64_t width, std::int64_t height) {
  const bool denoising = !outputs.denoising.empty();
  const auto images = outputs.last.logits.size(0);
  std::vector<at::Tensor> packed{at::tensor({static_cast<std::int64_t>(outputs.auxiliary.size()),
                                             static_cast<std::int64_t>(outputs.denoising.size()), outputs.denoising_match.groups,
                                             denoising ? images : 0, width, height},
                                            at::kLong),
                                 outputs.up, outputs.reg_scale};
  const auto add = [&](const FdrLevel& level) { packed.insert(packed.end(), {level.logits, level.boxes, level.corners, level.references}); };
  add(outputs.last);
  for (const auto& level : outputs.auxiliary) add(level);
  packed.insert(packed.end(), {outputs.pre.logits, outputs.pre.boxes, outputs.encoder.logits, outputs.encoder.boxes});
  for (const auto& level : outputs.denoising) add(level);
  if (denoising) {
    packed.insert(packed.end(), {outputs.denoising_pre.logits, outputs.denoising_pre.boxes});
    packed.insert(packed.end(), outputs.denoising_match.positive_queries.begin(), outputs.denoising_match.positive_queries.end());
  }
  return packed;
}

PackedDfineOutputs unpack_dfine_outputs(const std::vector<at::Tensor>& packed) {
  if (packed.empty() || packed[0].scalar_type() != at::kLong || packed[0].numel() != 6) {
    throw RuntimeError("D-FINE outputs: not the packed form pack_dfine_outputs writes");
  }
  const at::Tensor header = packed[0].contiguous();
  const std::int64_t* h = header.data_ptr<std::int64_t>();
  const std::int64_t expected = 3 + 4 * (1 + h[0]) + 4 + 4 * h[1] + (h[1] > 0 ? 2 + h[3] : 0);
  if (static_cast<std::int64_t>(packed.size()) != expected) {
    throw RuntimeError(fmt::format("D-FINE outputs: {} tensors where the header says {}", packed.size(), expected));
  }
  PackedDfineOutputs out;
  out.width = h[4];
  out.height = h[5];
  out.outputs.up = packed[1];
  out.outputs.reg_scale = packed[2];
  std::size_t next = 3;
  const auto take = [&] {
    FdrLevel level{packed[next], packed[next + 1], packed[next + 2], packed[next + 3]};
    next += 4;
    return level;
  };
  out.outputs.last = take();
  for (std::int64_t i = 0; i < h[0]; ++i) out.outputs.auxiliary.push_back(take());
  out.outputs.pre = {packed[next], packed[next + 1]};
  out.outputs.encoder = {packed[next + 2], packed[next + 3]};
  next += 4;
  for (std::int64_t i = 0; i < h[1]; ++i) out.outputs.denoising.push_back(take());
  if (h[1] > 0) {
    out.outputs.denoising_pre = {packed[next], packed[next + 1]};
    next += 2;
    out.outputs.denoising_match.groups = h[2];
    for (std::int64_t i = 0; i < h[3]; ++i) out.outputs.denoising_match.positive_queries.push_back(packed[next++]);
  }
  return out;
}

namespace {

class DfineLoss final : public TrainingLoss {
 public:
  DfineLoss(std::int64_t classes, bool mal, const GlobalNormaliser& normaliser, const GlobalShare& share)
      : normaliser_(normaliser), share_(share) {
    options_.classes = classes;
    options_.mal = mal;  // DEIM's criterion (RT-DETRv4's too): MAL (gamma 1.5) in place of VFL
  }
  LossTerms operator()(const std::vector<at::Tensor>& maps, const TargetBatch& targets) const override {
    const StepPart part("loss");  // a named phase in the profiler (its matcher's included)
    const PackedDfineOutputs packed = unpack_dfine_outputs(maps);
    return dfine_loss(packed.outputs, detr_targets(targets, packed.width, packed.height), packed.outputs.up,
                      packed.outputs.reg_scale, options_, normaliser_, share_);
  }
  std::string capture_obstacle() const override { return "the Hungarian matcher runs on the host"; }

 private:
  DfineCriterionOptions options_;
  GlobalNormaliser normaliser_;
  GlobalShare share_;
};

// D-FINE's network and trainer, as each family that builds on them specifies (DfineStyleSpec).
class DfineStyleFamily final : public Family {
 public:
  explicit DfineStyleFamily(DfineStyleSpec spec) : spec_(std::move(spec)) {}
  std::string_view name() const override { return spec_.name; }
  std::string_view weights_prefix() const override { return spec_.weights_prefix; }
  std::vector<std::string> sizes() const override { return spec_.sizes; }
  int key_precedence() const override { return spec_.key_precedence; }
  // From scratch nothing is frozen; from weights (LibreYOLO's non-scratch build) D-FINE's stem is
  // frozen, and l and x (both families) freeze the backbone's BatchNorm layers.
  models::Model build(const std::string& size, int class_count, int, bool fine_tune) const override {
    DfineModel net(DfineOptions{.size = size, .classes = class_count, .queries = kQueries, .scratch = !fine_tune, .variant = spec_.network});
    models::Model model;
    model.display_name = fmt::format("{}-{}", display_family(), size);
    model.module = net.ptr();
    model.forward = [net](const at::Tensor& x) mutable {
      const DfineOutputs out = net->forward(x);
      return std::vector<at::Tensor>{out.last.logits, out.last.boxes};
    };
    model.forward_raw = [net](const at::Tensor& x) mutable { return pack_dfine_outputs(net->forward(x), x.size(3), x.size(2)); };
    const auto denoising = [class_count, share = model.batch_share](const at::Tensor& x, const TargetBatch& targets) {
      return batch_denoising(x, targets, class_count, kQueries, /*mirror_negative=*/true, *share);
    };
    model.forward_train = [net, denoising](const at::Tensor& x, const TargetBatch& targets) mutable {
      const DenoisingQueries queries = denoising(x, targets);
      return pack_dfine_outputs(net->forward(x, &queries), x.size(3), x.size(2));
    };
    model.train_region = {.modules = net->encode_modules(),
                          .run = [net](const at::Tensor& x) mutable { return net->encode(x); },
                          .rest = [net, denoising](const at::Tensor& x, const std::vector<at::Tensor>& features,
                                                   const TargetBatch& targets) mutable {
                            const DenoisingQueries queries = denoising(x, targets);
                            return pack_dfine_outputs(net->decode(features, &queries), x.size(3), x.size(2));
                          }};
    model.fuse = [] {};
    return model;
  }
  std::string input_size_obstacle(const std::string& size, int image_size) const override {
    return query_positions_obstacle(fmt::format("{}-{}", display_family(), size), dfine_config(size).strides, image_size, kQueries);
  }
  std::string fine_tune_form(const std::string& size) const override {
    const bool norms = dfine_config(size).frozen_norm;
    if (spec_.network == DfineVariant::deim) return norms ? "the backbone's BatchNorm layers frozen" : "";  // no stem frozen
    return norms ? "the backbone's stem and BatchNorm layers frozen" : "the backbone's stem frozen";
  }
  bool written_in_fine_tune_form(const std::string& size, const std::map<std::string, at::Tensor>& tensors) const override {
    return dfine_config(size).frozen_norm && holds_frozen_backbone_norms(tensors);
  }
  std::vector<std::string> freeze_groups(bool) const override { return {"backbone.", "encoder.", "decoder."}; }
  bool recognises_key(std::string_view name) const override { return spec_.recognises_key && spec_.recognises_key(name); }
  bool is_training_only_tensor(std::string_view name) const override {
    return !spec_.training_only_prefix.empty() && name.starts_with(spec_.training_only_prefix);
  }
  std::string_view training_only_branch() const override { return spec_.training_only_branch; }
  at::Tensor network_input(const at::Tensor& images, const c10::Device& device) const override {
    return images.to(device, /*non_blocking=*/true).to(at::kFloat).div_(255.0);  // RGB, 0-1
  }
  Decoded decode(const std::vector<at::Tensor>&) const override {
    throw RuntimeError("D-FINE's and DEIM's outputs are not decoded for NMS: their detections are the top-k queries (detections())");
  }
  std::vector<at::Tensor> eval_maps(std::vector<at::Tensor> raw) const override {
    const PackedDfineOutputs packed = unpack_dfine_outputs(raw);
    return {packed.outputs.last.logits, packed.outputs.last.boxes};
  }
  std::optional<std::vector<at::Tensor>> detections(const std::vector<at::Tensor>& maps, std::int64_t width, std::int64_t height,
                                                    double confidence, int max_detections) const override {
    const std::vector<std::pair<double, double>> sizes(static_cast<std::size_t>(maps.at(0).size(0)),
                                                       {static_cast<double>(width), static_cast<double>(height)});
    return top_detections(maps.at(0).to(at::kFloat), maps.at(1).to(at::kFloat), sizes, confidence, max_detections,
                          /*clamp_sizes=*/true);
  }
  data::InputFit input_fit() const override { return data::InputFit::stretch; }
  // LibreYOLO's DETR multi-scale collate: imgsz repeated (D-FINE: n never resizes, s 20, m 6, l 4,
  // x 3 times; DEIM: 3) among the multiples of 32 from 0.75 to 1.25 x imgsz, until 85% (DEIM 91%)
  // of the epochs
  std::optional<BatchScales> batch_scales(const std::string& size, int image_size) const override {
    static const std::map<std::string, int> dfine_repeat{{"n", 0}, {"s", 20}, {"m", 6}, {"l", 4}, {"x", 3}};
    const int repeat = spec_.deim_trainer ? 3 : dfine_repeat.at(size);
    BatchScales scales;
    if (repeat == 0) return scales;
    const int low = static_cast<int>(image_size * 0.75 / 32) * 32, steps = (image_size - low) / 32;
    const int high = static_cast<int>(image_size * 1.25 / 32) * 32;
    for (int i = 0; i < steps; ++i) scales.sizes.push_back(low + i * 32);
    scales.sizes.insert(scales.sizes.end(), static_cast<std::size_t>(repeat), image_size);
    for (int i = 0; i < steps; ++i) scales.sizes.push_back(high - i * 32);
    return scales;
  }
  double validation_confidence() const override { return 0.0; }
  GraphRegion graph_region() const override { return GraphRegion::backbone_encoder; }
  bool may_leave_parameters_unused() const override { return true; }  // denoising_class_embed without targets
  ParameterRules parameter_rules(const config::Config& config) const override {
    return dfine_parameter_rules(config.get_real("backbone_lr_mult"));
  }
  std::vector<std::string> loss_names() const override {  // LibreYOLO's
    return {spec_.deim_trainer ? "mal" : "vfl", "bbox", "giou", "fgl", "ddf"};
  }
  std::unique_ptr<TrainingLoss> make_loss(const LossContext& context, const config::Config&) const override {
    return std::make_unique<DfineLoss>(context.classes, spec_.deim_trainer, context.global_normaliser, context.global_share);
  }
  bool channels_last_on_cpu() const override { return false; }
  bool warms_up_momentum() const override { return false; }
  // D-FINE's trainer loads the image resized to imgsz's long side, DEIM's at its own size
  std::shared_ptr<const data::SamplePipeline> sample_pipeline() const override { return dfine_pipeline(/*original_size=*/spec_.deim_trainer); }
  PrecisionNote precision_note(bool amp, bool float16) const override {
    const std::string_view family = display_family();
    if (!amp) {
      return {fmt::format("{} trains in float32 by default (amp=false, as the training-performance guide ships it): its "
                          "decoder clamps activations at 65504, the largest finite float16; amp=true amp_dtype=bfloat16 is the "
                          "mixed-precision lever",
                          family)};
    }
    if (float16) {
      return {fmt::format("amp=true with float16: {}'s decoder clamps its activations at 65504, the largest finite float16, so "
                          "a layer that overflows trains on a clipped value; amp_dtype=bfloat16 keeps float32's range",
                          family),
              true};
    }
    return {};
  }
  std::vector<config::OptionDefault> option_defaults(const std::string& size) const override { return spec_.option_defaults(size); }
  std::span<const config::OptionSpec> options() const override { return dfine_option_keys(); }

 private:
  std::string_view display_family() const { return spec_.display; }
  static constexpr int kQueries = 300;
  DfineStyleSpec spec_;
};

}  // namespace

std::unique_ptr<Family> make_dfine_style_family(DfineStyleSpec spec) { return std::make_unique<DfineStyleFamily>(std::move(spec)); }

}  // namespace libreyolo::models::detr
