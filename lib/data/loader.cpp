#include "data/loader.h"

#include <ATen/ATen.h>
#include <opencv2/core.hpp>

#include <malloc.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "data/sample_random.h"

namespace libreyolo::data {

void keep_image_buffers_in_heap() {
  ::mallopt(M_MMAP_THRESHOLD, 256 << 20);
  ::mallopt(M_TRIM_THRESHOLD, 512 << 20);
}

bool pinned_memory_available() { return at::globalContext().hasCUDA(); }

Batch collate(const std::vector<Sample>& samples, const std::vector<std::size_t>& indices, bool pin_memory,
              at::Tensor images) {
  Batch batch;
  batch.indices = indices;
  const int count = static_cast<int>(samples.size());
  const int height = count > 0 ? samples[0].image.rows : 0;
  const int width = count > 0 ? samples[0].image.cols : 0;
  const std::vector<std::int64_t> sizes{count, 3, height, width};
  batch.images = images.defined() && images.sizes() == at::IntArrayRef(sizes)
                     ? images
                     : at::empty(sizes, at::TensorOptions().dtype(at::kByte).pinned_memory(pin_memory));
  std::uint8_t* base = batch.images.data_ptr<std::uint8_t>();
  const std::size_t plane = static_cast<std::size_t>(height) * width;
  std::size_t box_count = 0;
  for (int b = 0; b < count; ++b) {
    const cv::Mat& image = samples[b].image;
    CV_Assert(image.rows == height && image.cols == width && image.type() == CV_8UC3);
    // split BGR straight into the tensor's R, G, B planes
    cv::Mat planes[3] = {cv::Mat(height, width, CV_8U, base + (3 * b + 2) * plane),
                         cv::Mat(height, width, CV_8U, base + (3 * b + 1) * plane),
                         cv::Mat(height, width, CV_8U, base + (3 * b + 0) * plane)};
    cv::split(image, planes);
    box_count += samples[b].boxes.size();
  }
  batch.targets = at::empty({static_cast<long>(box_count), 6}, at::kFloat);
  float* target = batch.targets.data_ptr<float>();
  for (int b = 0; b < count; ++b) {
    for (const auto& box : samples[b].boxes) {
      *target++ = static_cast<float>(b);
      *target++ = static_cast<float>(box.cls);
      *target++ = (box.x1 + box.x2) / 2 / width;
      *target++ = (box.y1 + box.y2) / 2 / height;
      *target++ = box.width() / width;
      *target++ = box.height() / height;
    }
  }
  return batch;
}

Loader::Loader(SampleFunction make_sample, std::size_t dataset_size, LoaderOptions options)
    : make_sample_(std::move(make_sample)), dataset_size_(dataset_size), options_(options),
      collate_(options_.collate ? options_.collate : CollateFunction(collate)) {
  options_.batch_size = std::max(1, options_.batch_size);
  options_.world_size = std::max(1, options_.world_size);
  options_.prefetch_batches = std::max(1, options_.prefetch_batches);
  // Our workers are the parallelism; OpenCV's own thread pool on top of them only contends
  // for the same cores (Ultralytics sets cv2.setNumThreads(0) in its workers for the same reason).
  if (options_.workers > 0) cv::setNumThreads(1);
  keep_image_buffers_in_heap();
  for (int i = 0; i < options_.workers; ++i) workers_.emplace_back([this] { worker_loop(); });
}

Loader::~Loader() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  for (auto& worker : workers_) worker.join();
}

std::vector<std::size_t> Loader::epoch_order(int epoch) const {
  std::vector<std::size_t> order;
  std::mt19937_64 engine(mix64(mix64(options_.seed) ^ static_cast<std::uint64_t>(epoch)));
  const bool with_replacement = !options_.weights.empty() || options_.samples_per_epoch > dataset_size_;
  if (with_replacement && dataset_size_ > 0) {
    const std::size_t draws = std::max(options_.samples_per_epoch, dataset_size_);
    if (options_.weights.empty()) {
      std::uniform_int_distribution<std::size_t> pick(0, dataset_size_ - 1);
      for (std::size_t i = 0; i < draws; ++i) order.push_back(pick(engine));
    } else {
      std::discrete_distribution<std::size_t> pick(options_.weights.begin(), options_.weights.end());
      for (std::size_t i = 0; i < draws; ++i) order.push_back(pick(engine));
    }
  } else {
    order.resize(dataset_size_);
    std::iota(order.begin(), order.end(), 0);
    if (options_.shuffle) std::shuffle(order.begin(), order.end(), engine);
  }
  if (options_.world_size == 1 || order.empty()) return order;
  // pad by wrapping so every rank gets the same count, then take rank, rank+world, ...
  const std::size_t world = static_cast<std::size_t>(options_.world_size);
  const std::size_t drawn = order.size(), per_rank = (drawn + world - 1) / world;
  for (std::size_t i = drawn, j = 0; i < per_rank * world; ++i, ++j) order.push_back(order[j % drawn]);
  std::vector<std::size_t> mine;
  for (std::size_t i = static_cast<std::size_t>(options_.rank); i < order.size(); i += world) mine.push_back(order[i]);
  return mine;
}

std::size_t Loader::batches_per_epoch() const {
  const std::size_t count = epoch_order(0).size();
  const std::size_t size = static_cast<std::size_t>(options_.batch_size);
  return options_.drop_last ? count / size : (count + size - 1) / size;
}

void Loader::start_epoch(int epoch, std::size_t first_batch) {
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

void Loader::release_after(const at::Tensor& images, std::function<bool()> done) {
  if (!images.defined()) return;
  std::lock_guard<std::mutex> lock(buffers_mutex_);
  for (const auto& buffer : image_buffers_) {  // only the pool's buffers come back
    if (buffer.data_ptr() == images.data_ptr()) copies_in_flight_[images.data_ptr()] = std::move(done);
  }
}

at::Tensor Loader::reusable_images(at::IntArrayRef sizes) {
  std::lock_guard<std::mutex> lock(buffers_mutex_);
  for (const auto& buffer : image_buffers_) {
    if (buffer.use_count() != 1 || buffer.sizes() != sizes) continue;
    if (const auto copy = copies_in_flight_.find(buffer.data_ptr()); copy != copies_in_flight_.end()) {
      if (!copy->second()) continue;  // still being copied from
      copies_in_flight_.erase(copy);
    }
    return buffer;
  }
  at::Tensor buffer = at::empty(sizes, at::TensorOptions().dtype(at::kByte).pinned_memory(options_.pin_memory));
  // the prefetch window plus the batch the trainer holds, and one per worker in flight
  const std::size_t limit = static_cast<std::size_t>(options_.prefetch_batches + options_.workers + 2);
  if (image_buffers_.size() < limit) image_buffers_.push_back(buffer);
  return buffer;
}

Batch Loader::build_batch(std::size_t batch_index, int epoch) {
  const auto& indices = batches_[batch_index];
  std::vector<Sample> samples;
  samples.reserve(indices.size());
  for (const std::size_t index : indices) samples.push_back(make_sample_(index, epoch, indices));
  at::Tensor images;
  if (!samples.empty()) {
    images = reusable_images({static_cast<std::int64_t>(samples.size()), 3, samples[0].image.rows, samples[0].image.cols});
  }
  return collate_(samples, indices, options_.pin_memory, images);
}

// Work is handed out one sample at a time (not one batch), so no worker idles while another
// finishes the last batch of an epoch alone; whoever completes a batch's last sample collates it.
void Loader::worker_loop() {
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

    Sample sample;
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
          const cv::Mat& first = done.samples[0].image;
          collated = collate_(done.samples, indices, options_.pin_memory,
                              reusable_images({static_cast<std::int64_t>(done.samples.size()), 3, first.rows, first.cols}));
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

std::optional<Batch> Loader::next() {
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

}  // namespace libreyolo::data
