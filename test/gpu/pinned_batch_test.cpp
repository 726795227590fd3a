// GPU suite: with a CUDA device, collated batches live in pinned host memory and copy to the
// device unchanged. Exits 77 (meson: skipped) when the machine has no CUDA device.
#include "data/loader.h"

#include <ATen/ATen.h>
#include <fmt/core.h>
#include <opencv2/core.hpp>

int main() {
  if (!libreyolo::data::pinned_memory_available()) {
    fmt::print("skipped: no CUDA device\n");
    return 77;
  }
  std::vector<libreyolo::data::Sample> samples(2);
  for (auto& sample : samples) {
    sample.image = cv::Mat(64, 64, CV_8UC3);
    cv::randu(sample.image, 0, 255);
    sample.boxes.push_back({1, 4, 4, 20, 30});
  }
  const auto batch = libreyolo::data::collate(samples, {0, 1}, /*pin_memory=*/true);
  if (!batch.images.is_pinned()) {
    fmt::print("batch images are not pinned\n");
    return 1;
  }
  const at::Tensor on_device = batch.images.to(at::kCUDA, /*non_blocking=*/true);
  const bool same = at::equal(on_device.cpu(), batch.images);
  fmt::print("pinned batch copied to cuda: {}\n", same ? "identical" : "DIFFERENT");
  return same ? 0 : 1;
}
