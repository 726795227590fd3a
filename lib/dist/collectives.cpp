#include "dist/collectives.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <algorithm>

namespace libreyolo::dist {

namespace {

// `tensor` on `device`, contiguous: the tensor itself when it already is.
at::Tensor on_device(const at::Tensor& tensor, const c10::Device& device) {
  return tensor.to(device).contiguous();
}

}  // namespace

std::optional<std::string> lost_peer_message(std::string_view what, int rank, int world_size) {
  for (const char* sign : {"Connection reset by peer", "Connection closed by peer", "Timed out", "timed out", "Broken pipe",
                           "Socket Timeout"}) {
    if (what.find(sign) == std::string_view::npos) continue;
    return fmt::format("rank {} of {} lost contact with another rank ({}): it failed, was killed, or did not answer within "
                       "dist_timeout; its own message says why. This rank stops too",
                       rank, world_size, sign);
  }
  return std::nullopt;
}

std::string GroupCollectives::describe_failure(const std::exception& error) const {
  return lost_peer_message(error.what(), rank(), world_size()).value_or(error.what());
}

void GroupCollectives::all_reduce(at::Tensor& tensor, c10d::ReduceOp::RedOpType op) {
  std::vector<at::Tensor> tensors{on_device(tensor, device_)};
  group_.group().allreduce(tensors, c10d::AllreduceOptions{.reduceOp = c10d::ReduceOp(op)})->wait();
  if (!tensors[0].is_same(tensor)) tensor.copy_(tensors[0]);
}

void GroupCollectives::sum(at::Tensor& tensor) { all_reduce(tensor, c10d::ReduceOp::SUM); }

void GroupCollectives::max(at::Tensor& tensor) { all_reduce(tensor, c10d::ReduceOp::MAX); }

at::Tensor GroupCollectives::gather_rows(const at::Tensor& rows) {
  const int world = world_size();
  // the row counts first, then every rank's rows padded to the longest
  std::vector<at::Tensor> count{at::full({1}, rows.size(0), at::TensorOptions().dtype(at::kLong).device(device_))};
  std::vector<std::vector<at::Tensor>> counts(1);
  for (int r = 0; r < world; ++r) counts[0].push_back(at::empty_like(count[0]));
  group_.group().allgather(counts, count)->wait();
  std::vector<std::int64_t> sizes;
  for (const auto& c : counts[0]) sizes.push_back(c.item<std::int64_t>());
  const std::int64_t longest = *std::max_element(sizes.begin(), sizes.end());
  std::vector<std::int64_t> shape(rows.sizes().begin(), rows.sizes().end());
  shape[0] = longest;
  at::Tensor padded = at::zeros(shape, rows.options().device(device_));
  if (rows.size(0) > 0) padded.narrow(0, 0, rows.size(0)).copy_(rows);
  std::vector<at::Tensor> mine{padded};
  std::vector<std::vector<at::Tensor>> all(1);
  for (int r = 0; r < world; ++r) all[0].push_back(at::empty_like(padded));
  group_.group().allgather(all, mine)->wait();
  std::vector<at::Tensor> parts;
  for (int r = 0; r < world; ++r) parts.push_back(all[0][static_cast<std::size_t>(r)].narrow(0, 0, sizes[static_cast<std::size_t>(r)]));
  return at::cat(parts).to(rows.device());
}

}  // namespace libreyolo::dist
