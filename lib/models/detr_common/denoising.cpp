#include "models/detr_common/denoising.h"

#include "models/box_ops.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <utility>

namespace libreyolo::models::detr {

at::Tensor inverse_sigmoid(const at::Tensor& x, double eps) {
  const at::Tensor clipped = x.clip(0.0, 1.0);
  return at::log(clipped.clip(eps) / (1 - clipped).clip(eps));
}

std::pair<std::int64_t, std::int64_t> denoising_shape(const std::vector<std::int64_t>& counts, const DenoisingOptions& options) {
  const std::int64_t most = std::max(options.most_targets, counts.empty() ? 0 : *std::max_element(counts.begin(), counts.end()));
  if (options.denoising <= 0 || most == 0) return {0, 0};
  const std::int64_t groups = std::max<std::int64_t>(1, options.denoising / most);
  return {most * 2 * groups, groups};
}

DenoisingNoise draw_denoising_noise(std::int64_t images, std::int64_t count, std::int64_t classes, at::Generator generator) {
  DenoisingNoise noise;
  noise.label_uniform = at::rand({images, count}, generator, at::kFloat);
  noise.random_label = at::randint(0, classes, {images, count}, generator, at::kLong);
  noise.sign_bit = at::randint(0, 2, {images, count, 4}, generator, at::kFloat);
  noise.box_uniform = at::rand({images, count, 4}, generator, at::kFloat);
  return noise;
}

DenoisingNoise draw_denoising_noise_share(std::int64_t images, std::int64_t count, std::int64_t classes, at::Generator generator,
                                          int rank, int world_size) {
  if (world_size <= 1) return draw_denoising_noise(images, count, classes, std::move(generator));
  const DenoisingNoise global = draw_denoising_noise(images * world_size, count, classes, std::move(generator));
  const at::Tensor rows = at::arange(rank, images * world_size, world_size, at::kLong);
  return {global.label_uniform.index_select(0, rows), global.random_label.index_select(0, rows),
          global.sign_bit.index_select(0, rows), global.box_uniform.index_select(0, rows)};
}

DenoisingQueries make_denoising_queries(const DetrTargets& targets, const DenoisingOptions& options, const DenoisingNoise& noise) {
  DenoisingQueries out;
  const auto [count, groups] = denoising_shape(targets.counts, options);
  if (count == 0) return out;
  const auto device = targets.boxes.device();
  const std::int64_t images = static_cast<std::int64_t>(targets.counts.size()), most = count / (2 * groups);
  // the targets padded to `most` per image, then tiled to 2 * groups copies (positive, negative per group)
  at::Tensor classes = at::full({images, most}, options.classes, at::TensorOptions().dtype(at::kLong).device(device));
  at::Tensor boxes = at::zeros({images, most, 4}, targets.boxes.options());
  at::Tensor present = at::zeros({images, most}, at::TensorOptions().dtype(at::kBool).device(device));
  std::int64_t first = 0;
  for (std::int64_t i = 0; i < images; ++i) {
    const std::int64_t n = targets.counts[static_cast<std::size_t>(i)];
    if (n > 0) {
      classes[i].narrow(0, 0, n).copy_(targets.classes.narrow(0, first, n));
      boxes[i].narrow(0, 0, n).copy_(targets.boxes.narrow(0, first, n));
      present[i].narrow(0, 0, n).fill_(true);
    }
    first += n;
  }
  classes = classes.repeat({1, 2 * groups});
  boxes = boxes.repeat({1, 2 * groups, 1});
  present = present.repeat({1, 2 * groups});
  at::Tensor negative = at::zeros({images, most * 2, 1}, targets.boxes.options());
  negative.narrow(1, most, most).fill_(1);
  negative = negative.repeat({1, groups, 1});
  const at::Tensor positive = (1 - negative).squeeze(-1) * present;
  // each image's positives, group-major (nonzero's row order)
  const at::Tensor positive_index = at::nonzero(positive).select(1, 1).cpu();
  std::int64_t offset = 0;
  for (const std::int64_t n : targets.counts) {
    out.match.positive_queries.push_back(positive_index.narrow(0, offset, n * groups).to(device));
    offset += n * groups;
  }
  out.match.groups = groups;
  if (options.label_noise > 0) {
    const at::Tensor flip = noise.label_uniform.to(device) < options.label_noise * 0.5;
    classes = at::where(flip & present, noise.random_label.to(device, at::kLong), classes);
  }
  if (options.box_noise > 0) {
    at::Tensor corners = centre_size_to_corners(boxes);
    const at::Tensor half = boxes.narrow(-1, 2, 2) * 0.5;
    const at::Tensor diff = half.repeat({1, 1, 2}) * options.box_noise;
    const at::Tensor sign = noise.sign_bit.to(device, boxes.scalar_type()) * 2.0 - 1.0;
    const at::Tensor uniform = noise.box_uniform.to(device, boxes.scalar_type());
    at::Tensor part = (uniform + 1.0) * negative + uniform * (1 - negative);
    part = part * sign;
    corners = (corners + part * diff).clip_(0.0, 1.0);
    boxes = corners_to_centre_size(corners);
    if (options.mirror_negative) boxes = at::where(boxes < 0, -boxes, boxes);  // D-FINE's `x[x < 0] *= -1`
    boxes = inverse_sigmoid(boxes);
  }
  out.classes = classes;
  out.boxes_unact = boxes;
  out.count = count;
  // matching queries do not see the denoising ones; a group sees only itself
  const std::int64_t size = count + options.queries, span = most * 2;
  at::Tensor mask = at::zeros({size, size}, at::TensorOptions().dtype(at::kBool).device(device));
  mask.narrow(0, count, options.queries).narrow(1, 0, count).fill_(true);
  for (std::int64_t g = 0; g < groups; ++g) {
    at::Tensor rows = mask.narrow(0, span * g, span);
    if (span * (g + 1) < count) rows.narrow(1, span * (g + 1), count - span * (g + 1)).fill_(true);
    if (g > 0) rows.narrow(1, 0, span * g).fill_(true);
  }
  out.attn_mask = mask;
  return out;
}

}  // namespace libreyolo::models::detr
