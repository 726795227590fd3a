// The batch loader: C++ worker threads build whole batches ahead of the trainer into a bounded
// queue, in a fixed order. Epoch order comes from (seed, epoch), each sample's augmentation from
// (seed, epoch, index), so the batches are the same whatever `workers` is. Distributed runs
// take every world_size-th sample from rank's offset (padded like DistributedSampler).
//
// The loader is a template over the task's sample type (anything with an 8-bit BGR cv::Mat
// `image`): a task brings its sample and its collate and instantiates SampleLoader over them
// (data::Loader is detection's); the trainer sees a BatchSource.
#pragma once

#include "data/batch_source.h"
#include "data/sample.h"

#include <ATen/Tensor.h>
#include <opencv2/core/mat.hpp>

#include <algorithm>
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

// The batches' image tensors, handed out again once only the pool holds them (and an
// asynchronous copy from them is done). Reusing them spares a 20 MB allocation (and its page
// faults, or a pinned cudaHostAlloc) per batch. Thread-safe.
class ImageBufferPool {
 public:
  ImageBufferPool(bool pin_memory, std::size_t limit) : pin_memory_(pin_memory), limit_(limit) {}
  at::Tensor take(at::IntArrayRef sizes);  // uint8, a free buffer of these sizes or a new one
  void release_after(const at::Tensor& images, std::function<bool()> done);

 private:
  bool pin_memory_;
  std::size_t limit_;  // buffers kept
  std::mutex mutex_;
  std::vector<at::Tensor> buffers_;
  std::map<const void*, std::function<bool()>> copies_in_flight_;  // by buffer: whether its copy is done
};

// Sets up the process for loader workers (OpenCV's own threads off when `workers` > 0, image
// buffers kept in the heap); every SampleLoader calls it.
void prepare_loader_workers(int workers);

template <class SampleT>
class SampleLoader : public BatchSource {
 public:
  // Builds one sample; `batch` holds the indices of the batch it belongs to.
  using SampleFunction = std::function<SampleT(std::size_t index, int epoch, std::span<const std::size_t> batch)>;
  // Stacks a batch's samples into a Batch; `images` is a free uint8 [B, 3, H, W] buffer to fill
  // (the size of the first sample's image) or undefined.
  using CollateFunction = std::function<Batch(const std::vector<SampleT>& samples, const std::vector<std::size_t>& indices,
                                              bool pin_memory, at::Tensor images)>;

  SampleLoader(SampleFunction make_sample, CollateFunction collate, std::size_t dataset_size, LoaderOptions options);
  ~SampleLoader() override;
  SampleLoader(const SampleLoader&) = delete;
  SampleLoader& operator=(const SampleLoader&) = delete;

  void start_epoch(int epoch, std::size_t first_batch = 0) override;
  std::optional<Batch> next() override;
  void release_after(const at::Tensor& images, std::function<bool()> done) override { buffers_.release_after(images, std::move(done)); }
  std::size_t batches_per_epoch() const override;
  std::vector<std::size_t> epoch_order(int epoch) const override { return data::epoch_order(options_, dataset_size_, epoch); }

 private:
  void worker_loop();
  Batch build_batch(std::size_t batch_index, int epoch);
  Batch collate_batch(const std::vector<SampleT>& samples, const std::vector<std::size_t>& indices);

  SampleFunction make_sample_;
  CollateFunction collate_;
  std::size_t dataset_size_;
  LoaderOptions options_;
  // the prefetch window plus the batch the trainer holds, and one per worker in flight
  ImageBufferPool buffers_;

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
    std::vector<SampleT> samples;
    std::size_t remaining = 0;
    std::exception_ptr error;
  };
  std::map<std::size_t, PendingBatch> pending_;  // batches whose samples are still being built
  std::map<std::size_t, Batch> ready_;
  std::map<std::size_t, std::exception_ptr> errors_;  // by batch: raised when the consumer gets there
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

// Images of one size (8-bit BGR) as uint8 RGB [count, 3, H, W]: into `images` when it has that
// shape, else a new tensor (pinned when asked). Every task's collate stacks its images with it.
at::Tensor stack_images(int count, const std::function<const cv::Mat&(int)>& image_of, bool pin_memory, at::Tensor images = {});

// Detection's samples (an image and its boxes) and their collate: square samples of one size
// stacked into a Batch (BGR HWC -> RGB CHW, pixel xyxy -> [N, 6] rows, cxcywh/size). `images` may
// be a preallocated uint8 [B, 3, H, W] tensor to fill; otherwise one is allocated.
Batch collate(const std::vector<Sample>& samples, const std::vector<std::size_t>& indices, bool pin_memory,
              at::Tensor images = {});

// Detection's loader: its samples, stacked by collate above.
class Loader final : public SampleLoader<Sample> {
 public:
  Loader(SampleFunction make_sample, std::size_t dataset_size, LoaderOptions options)
      : SampleLoader<Sample>(std::move(make_sample), CollateFunction(data::collate), dataset_size, std::move(options)) {}
};

// ---- SampleLoader's members -------------------------------------------------------------------

namespace loader_detail {
inline LoaderOptions checked(LoaderOptions options) {
  options.batch_size = std::max(1, options.batch_size);
  options.world_size = std::max(1, options.world_size);
  options.prefetch_batches = std::max(1, options.prefetch_batches);
  return options;
}
}  // namespace loader_detail

template <class SampleT>
SampleLoader<SampleT>::SampleLoader(SampleFunction make_sample, CollateFunction collate, std::size_t dataset_size,
                                    LoaderOptions options)
    : make_sample_(std::move(make_sample)), collate_(std::move(collate)), dataset_size_(dataset_size),
      options_(loader_detail::checked(std::move(options))),
      buffers_(options_.pin_memory, static_cast<std::size_t>(options_.prefetch_batches + options_.workers + 2)) {
  prepare_loader_workers(options_.workers);
  for (int i = 0; i < options_.workers; ++i) workers_.emplace_back([this] { worker_loop(); });
}

template <class SampleT>
SampleLoader<SampleT>::~SampleLoader() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  for (auto& worker : workers_) worker.join();
}

template <class SampleT>
std::size_t SampleLoader<SampleT>::batches_per_epoch() const {
  const std::size_t count = epoch_order(0).size();
  const std::size_t size = static_cast<std::size_t>(options_.batch_size);
  return options_.drop_last ? count / size : (count + size - 1) / size;
}

template <class SampleT>
void SampleLoader<SampleT>::start_epoch(int epoch, std::size_t first_batch) {
  const auto order = epoch_order(epoch);
  std::unique_lock<std::mutex> lock(mutex_);
  batch_ready_.wait(lock, [&] { return in_flight_ == 0; });  // let the previous epoch's builds land
  batches_.clear();
  const std::size_t size = static_cast<std::size_t>(options_.batch_size);
  for (std::size_t start = 0; start < order.size(); start += size) {
    if (options_.drop_last && start + size > order.size()) break;
    batches_.emplace_back(order.begin() + static_cast<long>(start),
                          order.begin() + static_cast<long>(std::min(order.size(), start + size)));
  }
  epoch_ = epoch;
  next_to_build_ = std::min(first_batch, batches_.size());
  next_sample_ = 0;
  next_to_return_ = next_to_build_;
  pending_.clear();
  ready_.clear();
  errors_.clear();
  lock.unlock();
  work_ready_.notify_all();
}

template <class SampleT>
Batch SampleLoader<SampleT>::collate_batch(const std::vector<SampleT>& samples, const std::vector<std::size_t>& indices) {
  at::Tensor images;
  if (!samples.empty()) {
    const cv::Mat& first = samples[0].image;
    images = buffers_.take({static_cast<std::int64_t>(samples.size()), 3, first.rows, first.cols});
  }
  return collate_(samples, indices, options_.pin_memory, images);
}

template <class SampleT>
Batch SampleLoader<SampleT>::build_batch(std::size_t batch_index, int epoch) {
  const auto& indices = batches_[batch_index];
  std::vector<SampleT> samples;
  samples.reserve(indices.size());
  for (const std::size_t index : indices) samples.push_back(make_sample_(index, epoch, indices));
  return collate_batch(samples, indices);
}

// Work is handed out one sample at a time (not one batch), so no worker idles while another
// finishes the last batch of an epoch alone; whoever completes a batch's last sample collates it.
template <class SampleT>
void SampleLoader<SampleT>::worker_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    work_ready_.wait(lock, [&] {
      return stopping_ || (next_to_build_ < batches_.size() && next_to_build_ < next_to_return_ + options_.prefetch_batches);
    });
    if (stopping_) return;
    const std::size_t batch_index = next_to_build_;
    const std::size_t slot = next_sample_++;
    const std::vector<std::size_t>& indices = batches_[batch_index];
    if (next_sample_ == indices.size()) {
      ++next_to_build_;
      next_sample_ = 0;
    }
    auto [pending, created] = pending_.try_emplace(batch_index);
    if (created) {
      pending->second.samples.resize(indices.size());
      pending->second.remaining = indices.size();
    }
    const int epoch = epoch_;
    ++in_flight_;
    lock.unlock();

    SampleT sample;
    std::exception_ptr error;
    try {
      sample = make_sample_(indices[slot], epoch, indices);
    } catch (...) {
      error = std::current_exception();
    }

    lock.lock();
    PendingBatch& batch = pending_.at(batch_index);
    if (error && !batch.error) batch.error = error;
    batch.samples[slot] = std::move(sample);
    if (--batch.remaining == 0) {
      PendingBatch done = std::move(batch);
      pending_.erase(batch_index);
      if (done.error) {
        errors_.emplace(batch_index, done.error);
      } else {
        lock.unlock();
        std::optional<Batch> collated;
        try {
          collated = collate_batch(done.samples, indices);
        } catch (...) {
          error = std::current_exception();
        }
        lock.lock();
        if (collated) {
          ready_.emplace(batch_index, std::move(*collated));
        } else {
          errors_.emplace(batch_index, error);
        }
      }
    }
    --in_flight_;
    batch_ready_.notify_all();
  }
}

template <class SampleT>
std::optional<Batch> SampleLoader<SampleT>::next() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (next_to_return_ >= batches_.size()) return std::nullopt;
  const std::size_t wanted = next_to_return_;
  if (workers_.empty()) {
    ++next_to_return_;
    const int epoch = epoch_;
    lock.unlock();
    return build_batch(wanted, epoch);
  }
  batch_ready_.wait(lock, [&] { return errors_.count(wanted) > 0 || ready_.count(wanted) > 0; });
  if (errors_.count(wanted) > 0) std::rethrow_exception(errors_.at(wanted));
  Batch batch = std::move(ready_.at(wanted));
  ready_.erase(wanted);
  ++next_to_return_;
  lock.unlock();
  work_ready_.notify_all();
  return batch;
}

// Detection's instantiation lives in loader.cpp.
extern template class SampleLoader<Sample>;

}  // namespace libreyolo::data
