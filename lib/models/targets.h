// Ground truth of a batch in the padded layout both assigners take: the loader's [N, 6] rows
// (image index, class, cx, cy, w, h normalised) become per-image slots [B, G] with a validity
// mask, G = the most boxes any image has. Built on the host from the loader's CPU tensor (so
// finding G syncs nothing), then moved to the training device in one copy each (queued from
// pinned memory on a GPU: no stream sync).
#pragma once

#include <ATen/Tensor.h>

#include <cstdint>

namespace libreyolo::models {

struct TargetBatch {
  at::Tensor classes;      // [B, G] int64, 0 in empty slots
  at::Tensor boxes_xyxy;   // [B, G, 4] float, input pixels
  at::Tensor boxes_cxcywh; // [B, G, 4] float, input pixels
  at::Tensor valid;        // [B, G] bool

  std::int64_t batch_size() const { return valid.size(0); }
  std::int64_t slots() const { return valid.size(1); }
  TargetBatch to(const at::Device& device) const;  // CUDA: pinned and non_blocking
  // A captured loss reads static tensors: a copy of every part, and a refill in place from a
  // batch of the same shapes (what the step runner does without naming the parts).
  TargetBatch clone() const;
  void copy_(const TargetBatch& other);
};

// `targets` [N, 6] on the CPU; `width`/`height` of the network input in pixels. `min_slots`: G
// is at least this (a fixed G keeps a captured loss's shapes static; empty slots change nothing).
// Throws std::invalid_argument for a row whose image index is outside [0, batch_size).
TargetBatch pad_targets(const at::Tensor& targets, std::int64_t batch_size, std::int64_t width, std::int64_t height,
                        std::int64_t min_slots = 0);

}  // namespace libreyolo::models
