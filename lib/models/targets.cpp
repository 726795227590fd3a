#include "models/targets.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <algorithm>
#include <utility>
#include <stdexcept>
#include <vector>

namespace libreyolo::models {

namespace {

// Each part through `f`, an undefined part left undefined.
template <class F>
TargetBatch each_part(const TargetBatch& batch, F f) {
  const auto apply = [&](const at::Tensor& t) { return t.defined() ? f(t) : at::Tensor(); };
  return {apply(batch.classes), apply(batch.boxes_xyxy), apply(batch.boxes_cxcywh), apply(batch.valid)};
}

}  // namespace

TargetBatch TargetBatch::to(const at::Device& device) const {
  if (!device.is_cuda()) return each_part(*this, [&](const at::Tensor& t) { return t.to(device); });
  // A copy from pageable memory synchronises the stream (the step would wait for the GPU at every
  // batch); from pinned memory it is queued. The caching host allocator keeps each pinned block
  // until the copy that reads it has run.
  return each_part(*this, [&](const at::Tensor& t) { return t.pin_memory().to(device, /*non_blocking=*/true); });
}

TargetBatch TargetBatch::clone() const {
  return each_part(*this, [](const at::Tensor& t) { return t.clone(); });
}

void TargetBatch::copy_(const TargetBatch& other) {
  const auto parts = {std::pair{&classes, &other.classes}, std::pair{&boxes_xyxy, &other.boxes_xyxy},
                       std::pair{&boxes_cxcywh, &other.boxes_cxcywh}, std::pair{&valid, &other.valid}};
  for (const auto& [to, from] : parts) {
    if (to->defined() != from->defined()) throw std::invalid_argument("TargetBatch::copy_: a part defined in one batch only");
  }
  for (const auto& [to, from] : parts) {
    if (to->defined()) to->copy_(*from);
  }
}

TargetBatch pad_targets(const at::Tensor& targets_in, std::int64_t batch_size, std::int64_t width, std::int64_t height,
                        std::int64_t min_slots) {
  const at::Tensor targets = targets_in.to(at::kCPU, at::kFloat).contiguous().reshape({-1, 6});
  const std::int64_t rows = targets.size(0);
  const auto row = targets.accessor<float, 2>();
  std::vector<std::int64_t> count(static_cast<std::size_t>(batch_size), 0);
  for (std::int64_t i = 0; i < rows; ++i) {
    const auto image = static_cast<std::int64_t>(row[i][0]);
    if (image < 0 || image >= batch_size) {
      throw std::invalid_argument(fmt::format("target row {} has image index {} outside a batch of {}", i, image, batch_size));
    }
    ++count[static_cast<std::size_t>(image)];
  }
  const std::int64_t slots = std::max(min_slots, count.empty() ? 0 : *std::max_element(count.begin(), count.end()));
  TargetBatch batch{at::zeros({batch_size, slots}, at::kLong), at::zeros({batch_size, slots, 4}, at::kFloat),
                    at::zeros({batch_size, slots, 4}, at::kFloat), at::zeros({batch_size, slots}, at::kBool)};
  auto classes = batch.classes.accessor<std::int64_t, 2>();
  auto xyxy = batch.boxes_xyxy.accessor<float, 3>();
  auto cxcywh = batch.boxes_cxcywh.accessor<float, 3>();
  auto valid = batch.valid.accessor<bool, 2>();
  std::fill(count.begin(), count.end(), 0);
  const auto w = static_cast<float>(width), h = static_cast<float>(height);
  for (std::int64_t i = 0; i < rows; ++i) {
    const auto image = static_cast<std::int64_t>(row[i][0]);
    const std::int64_t slot = count[static_cast<std::size_t>(image)]++;
    const float cx = row[i][2], cy = row[i][3], bw = row[i][4], bh = row[i][5];
    classes[image][slot] = static_cast<std::int64_t>(row[i][1]);
    // Corners from the normalised box, then scaled (the order LibreYOLO's YOLOv9 loss uses).
    xyxy[image][slot][0] = (cx - bw / 2) * w;
    xyxy[image][slot][1] = (cy - bh / 2) * h;
    xyxy[image][slot][2] = (cx + bw / 2) * w;
    xyxy[image][slot][3] = (cy + bh / 2) * h;
    cxcywh[image][slot][0] = cx * w;
    cxcywh[image][slot][1] = cy * h;
    cxcywh[image][slot][2] = bw * w;
    cxcywh[image][slot][3] = bh * h;
    valid[image][slot] = true;
  }
  return batch;
}

}  // namespace libreyolo::models
