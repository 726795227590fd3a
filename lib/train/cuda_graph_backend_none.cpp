// Builds without CUDA (-Dcuda=disabled or a CPU-only LibTorch): no graph backend.
#include "train/cuda_graph.h"

namespace libreyolo::train {

std::unique_ptr<CaptureBackend> make_cuda_graph_backend(int, std::string& why_not) {
  why_not = "this build has no CUDA";
  return nullptr;
}

std::shared_ptr<void> use_capture_stream(int) { return nullptr; }

}  // namespace libreyolo::train
