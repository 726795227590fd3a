// CPU-only LibTorch: nothing CUDA is linked, so there is nothing to ask.
#include "cuda/cuda_info.h"

namespace libreyolo::cuda {

CudaInfo query_cuda_info() {
  CudaInfo info;
  info.device_error = "this build has no CUDA (LibTorch without libtorch_cuda)";
  return info;
}

}  // namespace libreyolo::cuda
