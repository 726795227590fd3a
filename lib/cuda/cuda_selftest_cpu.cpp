// CPU-only LibTorch: the self-test cannot run.
#include "cuda/cuda_selftest.h"

namespace libreyolo::cuda {

SelfTestResult run_selftest(int) {
  SelfTestResult result;
  result.detail = "this build has no CUDA";
  return result;
}

}  // namespace libreyolo::cuda
