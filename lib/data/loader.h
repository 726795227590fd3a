// The batch loader: C++ worker threads build whole batches ahead of the trainer into a bounded
// queue, in a fixed order. Epoch order comes from (seed, epoch), each sample's augmentation from
// (seed, epoch, index), so the batches are the same whatever `workers` is. Distributed runs
// take every world_size-th sample from rank's offset (padded like DistributedSampler).
#pragma once

#include "data/sample.h"

#include <ATen/Tensor.h>

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <vector>

namespace libreyolo::data {

// What the loader hands the trainer: the images, the task's targets (which the loader and the
// step runner move without reading) and where the images came from.
struct Batch {
  at::Tensor images;   // uint8 [B, 3, H, W], RGB; pinned host memory when requested
  at::Tensor targets;  // the task's: detection's float32 [N, 6]: image index in batch, class, cx, cy, w, h (normalised)
  std::vector<std::size_t> indices;  // dataset indices of the images
};

// Every sample allocates image buffers of megabytes; glibc would mmap and munmap each one
// (page faults, zeroing and cross-core TLB shootdowns each time). This keeps such buffers in the
// heap for reuse. Process-wide; the Loader calls it.
void keep_image_buffers_in_heap();

// True when a CUDA device is usable, i.e. when pinned host memory helps the copy to it.
bool pinned_memory_available();

// Stacks square samples of one size into a Batch (BGR HWC -> RGB CHW, pixel xyxy -> cxcywh/size).
// `images` may be a preallocated uint8 [B, 3, H, W] tensor to fill; otherwise one is allocated.
Batch collate(const std::vector<Sample>& samples, const std::vector<std::size_t>& indices, bool pin_memory,
              at::Tensor images = {});
// How a batch's samples become a Batch: the task's (eval::Task::collate; detection's is collate above).
using CollateFunction = std::function<Batch(const std::vector<Sample>& samples, const std::vector<std::size_t>& indices,
                                            bool pin_memory, at::Tensor images)>;

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
  // The task's collate (eval::Task::collate); empty: detection's, data::collate.
  CollateFunction collate{};
};

class Loader {
 public:
  // Builds one sample; `batch` holds the indices of the batch it belongs to.
  using SampleFunction = std::function<Sample(std::size_t index, int epoch, std::span<const std::size_t> batch)>;

  Loader(SampleFunction make_sample, std::size_t dataset_size, LoaderOptions options);
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // Sets the order of the epoch and starts building its first batches; `first_batch` > 0
  // resumes mid-epoch (the earlier batches are not built).
  void start_epoch(int epoch, std::size_t first_batch = 0);
  // The next batch of the epoch, or nothing when the epoch is done. Rethrows a worker's error.
  std::optional<Batch> next();

  // A batch's images are being read by an asynchronous copy (to a GPU, non_blocking): the buffer is
  // not handed out again until `done` says the copy has finished. Without it, only a sync in every
  // step would keep a recycled pinned buffer from being overwritten under the copy.
  void release_after(const at::Tensor& images, std::function<bool()> done);

  std::size_t batches_per_epoch() const;
  // This rank's dataset indices for `epoch`, in batch order.
  std::vector<std::size_t> epoch_order(int epoch) const;

 private:
  void worker_loop();
  Batch build_batch(std::size_t batch_index, int epoch);
  at::Tensor reusable_images(at::IntArrayRef sizes);

  SampleFunction make_sample_;
  std::size_t dataset_size_;
  LoaderOptions options_;
  CollateFunction collate_;  // options_.collate, or data::collate

  std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable batch_ready_;
  std::vector<std::vector<std::size_t>> batches_;  // this epoch's index lists
  int epoch_ = -1;
  std::size_t next_to_build_ = 0;   // batch whose samples are being handed out
  std::size_t next_sample_ = 0;     // next sample of that batch
  std::size_t next_to_return_ = 0;
  std::size_t in_flight_ = 0;
  struct PendingBatch {
    std::vector<Sample> samples;
    std::size_t remaining = 0;
    std::exception_ptr error;
  };
  std::map<std::size_t, PendingBatch> pending_;  // batches whose samples are still being built
  std::map<std::size_t, Batch> ready_;
  std::map<std::size_t, std::exception_ptr> errors_;  // by batch: raised when the consumer gets there
  bool stopping_ = false;
  std::vector<std::thread> workers_;
  // Batch image tensors handed out before; one whose only owner is this pool is free again.
  // Reusing them spares a 20 MB allocation (and its page faults, or a pinned cudaHostAlloc)
  // per batch.
  std::mutex buffers_mutex_;
  std::vector<at::Tensor> image_buffers_;
  std::map<const void*, std::function<bool()>> copies_in_flight_;  // by buffer: whether its copy is done
};

}  // namespace libreyolo::data
