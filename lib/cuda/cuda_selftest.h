// A short self-test of the CUDA paths training relies on: a side stream, autocast, and a CUDA
// graph captured and replayed, each checked against eager results. Used by `libreyolo checks`
// and the gpu test suite.
#pragma once

#include <string>

namespace libreyolo::cuda {

struct SelfTestResult {
  bool ran = false;        // false: no CUDA device (or a CPU-only build)
  bool stream_ok = false;  // work on a side stream matches the default stream
  bool autocast_float16_ok = false;
  bool autocast_bfloat16_ok = false;  // false also when the GPU has no bf16
  bool graph_ok = false;   // captured graph replays to the eager result on new input
  std::string detail;      // what failed, or why it did not run
  bool passed() const { return ran && stream_ok && autocast_float16_ok && graph_ok; }
};

SelfTestResult run_selftest(int device_index = 0);

}  // namespace libreyolo::cuda
