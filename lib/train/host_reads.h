// Operators that make the host wait for a CUDA device: a value read back (item(), a Scalar taken
// from a tensor, equal) or an output whose size depends on the data (nonzero, masked_select,
// unique, a boolean-mask index, which calls nonzero). A CUDA graph cannot capture them, and in an
// eager step each one stalls the launch queue.
//
// HostReadWatch lists those the current thread calls while it lives, on any device: the CPU runs
// the same operators for the same code, so a CPU test can prove what a GPU capture would refuse
// (the tests' capture backend, RerunBackend, fails a capture the way CUDA would). What it cannot
// see: reads that are no operator (a CPU kernel's data_ptr) and copies to the host.
#pragma once

#include <ATen/record_function.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

namespace libreyolo::train {

bool is_host_read_operator(std::string_view name);

class HostReadWatch {
 public:
  HostReadWatch();  // listens on this thread (and the autograd threads it hands work to)
  ~HostReadWatch();
  HostReadWatch(const HostReadWatch&) = delete;
  HostReadWatch& operator=(const HostReadWatch&) = delete;

  bool empty() const;
  // "aten::nonzero x3, aten::_local_scalar_dense x1" (by name), or "" when none was called.
  std::string summary() const;

  struct Seen;

 private:
  at::CallbackHandle handle_;
  std::shared_ptr<Seen> seen_;
};

}  // namespace libreyolo::train
