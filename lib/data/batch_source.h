// What the trainer takes its batches from, whatever the task's samples are: images, the task's
// targets (which the trainer and the step runner move without reading) and where they came from.
// A task's loader (data::SampleLoader over its sample type, eval::Task::make_loader) is one.
#pragma once

#include <ATen/Tensor.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

namespace libreyolo::data {

struct Batch {
  at::Tensor images;   // uint8 [B, 3, H, W], RGB; pinned host memory when requested
  at::Tensor targets;  // the task's: detection's float32 [N, 6]: image index in batch, class, cx, cy, w, h (normalised)
  std::vector<std::size_t> indices;  // dataset indices of the images
};

struct LoaderOptions {
  int batch_size = 16;
  int workers = 2;            // 0: build batches on the calling thread
  bool shuffle = true;
  std::uint64_t seed = 0;
  int rank = 0;
  int world_size = 1;
  int prefetch_batches = 4;   // batches built ahead of the consumer
  bool pin_memory = false;
  bool drop_last = false;
  // Draws with replacement instead of one pass: `samples_per_epoch` of them (LibreYOLO's
  // min_samples floor when it exceeds the dataset), weighted by `weights` when given
  // (class_balanced). 0 and empty: a plain shuffled pass.
  std::size_t samples_per_epoch = 0;
  std::vector<double> weights{};
};

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // Sets the order of the epoch and starts building its first batches; `first_batch` > 0
  // resumes mid-epoch (the earlier batches are not built).
  virtual void start_epoch(int epoch, std::size_t first_batch = 0) = 0;
  // The next batch of the epoch, or nothing when the epoch is done. Rethrows a worker's error.
  virtual std::optional<Batch> next() = 0;
  // A batch's images are being read by an asynchronous copy (to a GPU, non_blocking): the buffer is
  // not handed out again until `done` says the copy has finished. Without it, only a sync in every
  // step would keep a recycled pinned buffer from being overwritten under the copy.
  virtual void release_after(const at::Tensor& images, std::function<bool()> done) = 0;
  virtual std::size_t batches_per_epoch() const = 0;
  // This rank's dataset indices for `epoch`, in batch order.
  virtual std::vector<std::size_t> epoch_order(int epoch) const = 0;
};

// This rank's dataset indices for `epoch` of a dataset of `dataset_size`, in batch order: a
// shuffle from (seed, epoch), or draws with replacement (options' samples_per_epoch and
// weights); a distributed run takes every world_size-th from rank's offset, padded by wrapping
// as DistributedSampler does.
std::vector<std::size_t> epoch_order(const LoaderOptions& options, std::size_t dataset_size, int epoch);

// Every sample allocates image buffers of megabytes; glibc would mmap and munmap each one
// (page faults, zeroing and cross-core TLB shootdowns each time). This keeps such buffers in the
// heap for reuse. Process-wide; the loaders call it.
void keep_image_buffers_in_heap();

// True when a CUDA device is usable, i.e. when pinned host memory helps the copy to it.
bool pinned_memory_available();

}  // namespace libreyolo::data
