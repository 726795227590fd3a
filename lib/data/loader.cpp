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

at::Tensor stack_images(int count, const std::function<const cv::Mat&(int)>& image_of, bool pin_memory, at::Tensor images) {
  const int height = count > 0 ? image_of(0).rows : 0;
  const int width = count > 0 ? image_of(0).cols : 0;
  const std::vector<std::int64_t> sizes{count, 3, height, width};
  at::Tensor out = images.defined() && images.sizes() == at::IntArrayRef(sizes)
                       ? images
                       : at::empty(sizes, at::TensorOptions().dtype(at::kByte).pinned_memory(pin_memory));
  std::uint8_t* base = out.data_ptr<std::uint8_t>();
  const std::size_t plane = static_cast<std::size_t>(height) * width;
  for (int b = 0; b < count; ++b) {
    const cv::Mat& image = image_of(b);
    CV_Assert(image.rows == height && image.cols == width && image.type() == CV_8UC3);
    // split BGR straight into the tensor's R, G, B planes
    cv::Mat planes[3] = {cv::Mat(height, width, CV_8U, base + (3 * b + 2) * plane),
                         cv::Mat(height, width, CV_8U, base + (3 * b + 1) * plane),
                         cv::Mat(height, width, CV_8U, base + (3 * b + 0) * plane)};
    cv::split(image, planes);
  }
  return out;
}

Batch collate(const std::vector<Sample>& samples, const std::vector<std::size_t>& indices, bool pin_memory,
              at::Tensor images) {
  Batch batch;
  batch.indices = indices;
  const int count = static_cast<int>(samples.size());
  const int height = count > 0 ? samples[0].image.rows : 0;
  const int width = count > 0 ? samples[0].image.cols : 0;
  batch.images = stack_images(count, [&](int b) -> const cv::Mat& { return samples[b].image; }, pin_memory, std::move(images));
  std::size_t box_count = 0;
  for (const auto& sample : samples) box_count += sample.boxes.size();
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

void prepare_loader_workers(int workers) {
  // Our workers are the parallelism; OpenCV's own thread pool on top of them only contends
  // for the same cores (Ultralytics sets cv2.setNumThreads(0) in its workers for the same reason).
  if (workers > 0) cv::setNumThreads(1);
  keep_image_buffers_in_heap();
}

std::vector<std::size_t> epoch_order(const LoaderOptions& options, std::size_t dataset_size, int epoch) {
  std::vector<std::size_t> order;
  std::mt19937_64 engine(mix64(mix64(options.seed) ^ static_cast<std::uint64_t>(epoch)));
  const bool with_replacement = !options.weights.empty() || options.samples_per_epoch > dataset_size;
  if (with_replacement && dataset_size > 0) {
    const std::size_t draws = std::max(options.samples_per_epoch, dataset_size);
    if (options.weights.empty()) {
      std::uniform_int_distribution<std::size_t> pick(0, dataset_size - 1);
      for (std::size_t i = 0; i < draws; ++i) order.push_back(pick(engine));
    } else {
      std::discrete_distribution<std::size_t> pick(options.weights.begin(), options.weights.end());
      for (std::size_t i = 0; i < draws; ++i) order.push_back(pick(engine));
    }
  } else {
    order.resize(dataset_size);
    std::iota(order.begin(), order.end(), 0);
    if (options.shuffle) std::shuffle(order.begin(), order.end(), engine);
  }
  const int world_size = std::max(1, options.world_size);
  if (world_size == 1 || order.empty()) return order;
  // pad by wrapping so every rank gets the same count, then take rank, rank+world, ...
  const std::size_t world = static_cast<std::size_t>(world_size);
  const std::size_t drawn = order.size(), per_rank = (drawn + world - 1) / world;
  for (std::size_t i = drawn, j = 0; i < per_rank * world; ++i, ++j) order.push_back(order[j % drawn]);
  std::vector<std::size_t> mine;
  for (std::size_t i = static_cast<std::size_t>(options.rank); i < order.size(); i += world) mine.push_back(order[i]);
  return mine;
}

void ImageBufferPool::release_after(const at::Tensor& images, std::function<bool()> done) {
  if (!images.defined()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& buffer : buffers_) {  // only the pool's buffers come back
    if (buffer.data_ptr() == images.data_ptr()) copies_in_flight_[images.data_ptr()] = std::move(done);
  }
}

at::Tensor ImageBufferPool::take(at::IntArrayRef sizes) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& buffer : buffers_) {
    if (buffer.use_count() != 1 || buffer.sizes() != sizes) continue;
    if (const auto copy = copies_in_flight_.find(buffer.data_ptr()); copy != copies_in_flight_.end()) {
      if (!copy->second()) continue;  // still being copied from
      copies_in_flight_.erase(copy);
    }
    return buffer;
  }
  at::Tensor buffer = at::empty(sizes, at::TensorOptions().dtype(at::kByte).pinned_memory(pin_memory_));
  if (buffers_.size() < limit_) buffers_.push_back(buffer);
  return buffer;
}

template class SampleLoader<Sample>;

}  // namespace libreyolo::data
