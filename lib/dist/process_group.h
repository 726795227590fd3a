// The process group of a data-parallel run: c10d's TCPStore on rank 0 for the rendezvous and a
// c10d backend for the collectives (Gloo for CPU tensors; NCCL for CUDA tensors when asked). This
// is PyTorch's own distributed engine from our LibTorch; nothing of it is ours but the setup.
#pragma once

#include "dist/launch_env.h"

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <chrono>
#include <memory>
#include <string>

namespace libreyolo::dist {

// Whether this build has c10d's NCCL backend (a CUDA build with nccl.h).
bool nccl_compiled();

struct GroupOptions {
  std::string backend = "gloo";  // "nccl": CUDA tensors over NCCL, CPU tensors still over Gloo
  std::chrono::seconds timeout{1800};  // dist_timeout: the rendezvous and every collective
};

// An open process group. Collectives go through group().
class Group {
 public:
  Group(const LaunchEnv& env, const GroupOptions& options);
  ~Group();
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  c10d::ProcessGroup& group();
  const c10::intrusive_ptr<c10d::ProcessGroup>& handle() const;
  int rank() const { return env_.rank; }
  int world_size() const { return env_.world_size; }
  int local_rank() const { return env_.local_rank; }
  // The rendezvous store (rank 0 publishes the run folder there).
  c10d::Store& store();

 private:
  struct State;
  LaunchEnv env_;
  std::unique_ptr<State> state_;
};

}  // namespace libreyolo::dist
