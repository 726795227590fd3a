// Ground truth of a batch as a loss takes it. Detection: the padded layout the assigners take,
// the loader's [N, 6] rows (image index, class, cx, cy, w, h normalised) as per-image slots
// [B, G] with a validity mask, G = the most boxes any image has. Classification: one class per
// image ([B] int64), or soft labels [B, C] float (MixUp/CutMix), and no boxes. Built on the host from the loader's CPU tensor (so
// finding G syncs nothing), then moved to the training device in one copy each (queued from
// pinned memory on a GPU: no stream sync).
#pragma once

#include <ATen/Tensor.h>

#include <cstdint>
#include <utility>

namespace libreyolo::models {

struct TargetBatch {
  at::Tensor classes;      // detection: [B, G] int64, 0 in empty slots; classification: [B] int64 or [B, C] float
  at::Tensor boxes_xyxy;   // [B, G, 4] float, input pixels (detection)
  at::Tensor boxes_cxcywh; // [B, G, 4] float, input pixels (detection)
  at::Tensor valid;        // [B, G] bool (detection)

  // A classification batch's: its classes, no boxes.
  static TargetBatch of_classes(at::Tensor classes) {
    TargetBatch batch;
    batch.classes = std::move(classes);
    return batch;
  }

  std::int64_t batch_size() const { return classes.size(0); }
  std::int64_t slots() const { return valid.defined() ? valid.size(1) : 0; }  // 0: no boxes (classification)
  TargetBatch to(const at::Device& device) const;  // CUDA: pinned and non_blocking
  // A captured loss reads static tensors: a copy of every part, and a refill in place from a
  // batch of the same shapes (what the step runner does without naming the parts). Parts a task
  // leaves undefined stay undefined.
  TargetBatch clone() const;
  void copy_(const TargetBatch& other);
};

// `targets` [N, 6] on the CPU; `width`/`height` of the network input in pixels. `min_slots`: G
// is at least this (a fixed G keeps a captured loss's shapes static; empty slots change nothing).
// Throws std::invalid_argument for a row whose image index is outside [0, batch_size).
TargetBatch pad_targets(const at::Tensor& targets, std::int64_t batch_size, std::int64_t width, std::int64_t height,
                        std::int64_t min_slots = 0);

}  // namespace libreyolo::models
