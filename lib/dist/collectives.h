// train::Collectives on a c10d process group: what the training loop asks of the other ranks
// (summed loss values and stop votes, gathered detections, loss normalisers) as Gloo or NCCL
// collectives. Tensors travel on the group's device (the CPU for Gloo, the rank's GPU for NCCL)
// and come back where they were.
#pragma once

#include "dist/process_group.h"
#include "train/collectives.h"

#include <c10/core/Device.h>
#include <optional>
#include <string>
#include <string_view>
#include <torch/csrc/distributed/c10d/Types.hpp>

namespace libreyolo::dist {

// A collective that failed because a peer went away (killed, crashed, hung past dist_timeout, or its
// machine lost), in a line a user reads instead of the transport's ("[.../pair.cc:547] Connection
// closed by peer"); nullopt for any other failure. Every such line starts "rank R of W lost contact".
std::optional<std::string> lost_peer_message(std::string_view what, int rank, int world_size);

class GroupCollectives final : public train::Collectives {
 public:
  GroupCollectives(Group& group, c10::Device device) : group_(group), device_(device) {}
  int rank() const override { return group_.rank(); }
  int world_size() const override { return group_.world_size(); }
  int local_rank() const override { return group_.local_rank(); }
  void sum(at::Tensor& tensor) override;
  void max(at::Tensor& tensor) override;
  at::Tensor gather_rows(const at::Tensor& rows) override;
  std::string describe_failure(const std::exception& error) const override;

 private:
  void all_reduce(at::Tensor& tensor, c10d::ReduceOp::RedOpType op);

  Group& group_;
  c10::Device device_;
};

}  // namespace libreyolo::dist
