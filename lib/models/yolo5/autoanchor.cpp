#include "models/yolo5/autoanchor.h"

#include "models/yolo5/model.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <random>

namespace libreyolo::models::yolo5 {

namespace {

// Per box and anchor, the worse of the two side ratios taken below 1: [N, K].
at::Tensor ratio_metric(const at::Tensor& sizes, const at::Tensor& anchors) {
  const at::Tensor r = sizes.unsqueeze(1) / anchors.unsqueeze(0);
  return at::minimum(r, 1 / r).amin(2);
}

double fitness(const at::Tensor& sizes, const at::Tensor& anchors, double threshold) {
  const at::Tensor best = ratio_metric(sizes, anchors).amax(1);
  return (best * best.gt(1 / threshold).to(best.scalar_type())).mean().item<double>();
}

// scipy.cluster.vq.kmeans's way: `restarts` runs of Lloyd's iterations from k distinct points, each
// until the mean distance improves by 1e-5 or less; the run of least mean distance. An empty
// cluster keeps its centre.
at::Tensor kmeans(const at::Tensor& points, int count, int restarts, std::mt19937_64& rng) {
  const std::int64_t n = points.size(0);
  at::Tensor best;
  double best_distortion = std::numeric_limits<double>::infinity();
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  for (int restart = 0; restart < restarts; ++restart) {
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    at::Tensor centres = points.index_select(0, at::tensor(std::vector<std::int64_t>(order.begin(), order.begin() + count)));
    double previous = std::numeric_limits<double>::infinity(), distortion = 0;
    for (int iteration = 0; iteration < 300; ++iteration) {
      const auto [distance, nearest] = at::cdist(points, centres).min(1);
      distortion = distance.mean().item<double>();
      at::Tensor sums = at::zeros_like(centres).index_add_(0, nearest, points);
      const at::Tensor members = at::zeros({count}, points.options()).index_add_(0, nearest, at::ones({n}, points.options()));
      centres = at::where(members.unsqueeze(1).gt(0), sums / members.clamp_min(1).unsqueeze(1), centres);
      if (previous - distortion <= 1e-5) break;
      previous = distortion;
    }
    if (distortion < best_distortion) {
      best_distortion = distortion;
      best = centres;
    }
  }
  return best;
}

at::Tensor sorted_by_area(const at::Tensor& anchors) { return anchors.index_select(0, anchors.prod(1).argsort()); }

}  // namespace

AnchorFit anchor_fit(const at::Tensor& sizes, const at::Tensor& anchors, double threshold) {
  const at::Tensor x = ratio_metric(sizes, anchors);
  const at::Tensor past = x.gt(1 / threshold).to(at::kFloat);
  return {past.amax(1).mean().item<double>(), past.sum(1).mean().item<double>()};
}

at::Tensor label_sizes(const data::DetectionDataset& dataset, int image_size, std::int64_t seed) {
  std::mt19937_64 rng(static_cast<std::uint64_t>(std::max<std::int64_t>(seed, 0)));
  std::uniform_real_distribution<double> jitter(0.9, 1.1);
  std::vector<float> values;
  for (std::size_t i = 0; i < dataset.size(); ++i) {
    const data::ImageRecord& record = dataset.record(i);
    const double scale = static_cast<double>(image_size) / std::max({record.width, record.height, 1});
    const double factor = seed >= 0 ? jitter(rng) : 1.0;
    for (const auto& box : record.boxes) {
      values.push_back(static_cast<float>(box.w * record.width * scale * factor));
      values.push_back(static_cast<float>(box.h * record.height * scale * factor));
    }
  }
  return at::tensor(values).view({-1, 2});
}

at::Tensor evolve_anchors(const at::Tensor& sizes_in, int count, int image_size, double threshold, int generations,
                          std::uint64_t seed) {
  const at::Tensor sizes = sizes_in.index({sizes_in.ge(2.0).any(1)}).to(at::kFloat);
  std::mt19937_64 rng(seed);
  at::Tensor anchors;
  if (sizes.size(0) >= count) {
    const at::Tensor points = sizes.to(at::kDouble), spread = points.std(0, /*unbiased=*/false).clamp_min(1e-9);
    anchors = (kmeans(points / spread, count, 30, rng) * spread).to(at::kFloat);
  } else {  // too few boxes for k-means: yolov5's random start
    std::uniform_real_distribution<float> uniform(0, 1);
    std::vector<float> values(static_cast<std::size_t>(2 * count));
    for (auto& v : values) v = uniform(rng) * static_cast<float>(image_size);
    std::sort(values.begin(), values.end());
    anchors = at::tensor(values).view({count, 2});
  }
  anchors = sorted_by_area(anchors);
  if (sizes.size(0) == 0) return anchors;
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  std::uniform_real_distribution<double> uniform(0, 1);
  double best = fitness(sizes, anchors, threshold);
  for (int generation = 0; generation < generations; ++generation) {
    at::Tensor factors;
    do {  // mutate until something changes
      const double sigma = uniform(rng) * 0.1;
      const at::Tensor mutated = at::rand(anchors.sizes(), generator).lt(0.9).to(at::kFloat);
      factors = (mutated * at::randn(anchors.sizes(), generator) * sigma + 1).clamp(0.3, 3.0);
    } while (factors.eq(1).all().item<bool>());
    const at::Tensor candidate = (anchors * factors).clamp_min(2.0);
    const double score = fitness(sizes, candidate, threshold);
    if (score > best) {
      best = score;
      anchors = candidate;
    }
  }
  return sorted_by_area(anchors);
}

std::string check_anchors(at::Tensor& grid_anchors, const data::DetectionDataset& dataset, int image_size, double threshold,
                          std::uint64_t seed) {
  const at::Tensor sizes = label_sizes(dataset, image_size, static_cast<std::int64_t>(seed & 0x7fffffff));
  if (sizes.size(0) == 0) return "AutoAnchor: the training labels hold no boxes; the anchors stay as they are";
  const at::Tensor strides = at::tensor(std::vector<float>(kStrides.begin(), kStrides.end())).view({-1, 1, 1});
  const at::Tensor current = (grid_anchors.detach().cpu().to(at::kFloat) * strides).view({-1, 2});
  const AnchorFit fit = anchor_fit(sizes, current, threshold);
  const std::string measured =
      fmt::format("AutoAnchor: {:.2f} anchors/target, {:.3f} best possible recall", fit.anchors_per_target, fit.best_possible_recall);
  if (fit.best_possible_recall > 0.98) return measured + ": the anchors fit the training labels";
  const at::Tensor evolved =
      evolve_anchors(label_sizes(dataset, image_size, -1), static_cast<int>(current.size(0)), image_size, threshold, 1000, seed);
  const AnchorFit better = anchor_fit(sizes, evolved, threshold);
  if (better.best_possible_recall <= fit.best_possible_recall) {
    return fmt::format("{}; evolved anchors reach {:.3f}, no better: the anchors stay as they are", measured,
                       better.best_possible_recall);
  }
  {
    at::NoGradGuard no_grad;
    grid_anchors.copy_((evolved.view(grid_anchors.sizes()) / strides).to(grid_anchors.options()));
  }
  std::string pixels;
  const at::Tensor rounded = evolved.round().to(at::kInt);
  for (std::int64_t i = 0; i < rounded.size(0); ++i) {
    pixels += fmt::format("{}{},{}", i ? " " : "", rounded[i][0].item<int>(), rounded[i][1].item<int>());
  }
  return fmt::format("{}; evolved anchors reach {:.3f} and replace them: {}", measured, better.best_possible_recall, pixels);
}

void round_to_half(torch::nn::Module& model) {
  at::NoGradGuard no_grad;
  auto round = [](at::Tensor& t) {
    if (t.defined() && t.is_floating_point()) t.copy_(t.to(at::kHalf));
  };
  for (auto& p : model.parameters()) round(p);
  for (auto& b : model.buffers()) round(b);
}

}  // namespace libreyolo::models::yolo5
