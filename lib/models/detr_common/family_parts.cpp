#include "models/detr_common/family_parts.h"

#include "core/error.h"
#include "core/step_part.h"

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

}  // namespace libreyolo::models::detr
