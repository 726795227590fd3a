#include "train/rank_agreement.h"

#include "core/error.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <algorithm>

namespace libreyolo::train {

namespace {

// The weights' checksum equal on every rank (every rank applies the same averaged gradients; a
// rank that drifted would train a different model unnoticed).
void check_weights_agree(Collectives& dist, torch::nn::Module& module, int epoch) {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> sums;
  for (const auto& p : module.parameters()) sums.push_back(p.detach().to(at::kDouble).sum());
  if (sums.empty()) return;
  const double local = at::stack(sums).sum().item<double>();  // one transfer, not one per tensor
  at::Tensor range = at::tensor({local, -local}, at::kDouble);
  dist.max(range);
  const double high = range[0].item<double>(), low = -range[1].item<double>();
  if (high != low) {
    throw RuntimeError(fmt::format("the ranks' weights differ after epoch {} (checksums {} to {}); this rank has {}. Please "
                                   "report it with train_config.yaml", epoch + 1, low, high, local));
  }
}

// One all-reduce for all of a module's floating buffers (flattened in double), not one per
// buffer: a YOLOv9-t has 873.
void average_batch_norm_statistics(Collectives& dist, torch::nn::Module& module) {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> buffers, flat;
  for (const auto& item : module.named_buffers()) {
    if (!at::isFloatingType(item.value().scalar_type())) continue;  // num_batches_tracked
    buffers.push_back(item.value());
    flat.push_back(item.value().detach().to(at::kDouble).reshape(-1));
  }
  if (buffers.empty()) return;
  at::Tensor all = at::cat(flat);
  dist.sum(all);
  all.div_(dist.world_size());
  std::int64_t offset = 0;
  for (auto& buffer : buffers) {
    buffer.copy_(all.narrow(0, offset, buffer.numel()).view(buffer.sizes()));
    offset += buffer.numel();
  }
}

}  // namespace

bool RankAgreement::any(bool local) {
  if (!dist_) return local;
  at::Tensor vote = at::full({1}, local ? 1.0 : 0.0, at::kDouble);
  dist_->max(vote);
  return vote.item<double>() > 0;
}

void RankAgreement::mean(std::vector<double>& values) {
  if (!dist_ || values.empty()) return;
  at::Tensor t = at::tensor(values, at::kDouble);
  dist_->sum(t);
  t.div_(dist_->world_size());
  std::copy(t.data_ptr<double>(), t.data_ptr<double>() + t.numel(), values.begin());
}

std::optional<StopRequest> RankAgreement::stop(std::optional<StopRequest> local) {
  if (!dist_) return local;
  at::Tensor vote = at::zeros({2}, at::kDouble);  // [interrupt exit code, finish]
  if (local && local->kind == StopRequest::Kind::interrupt) vote[0] = local->exit_code;
  if (local && local->kind == StopRequest::Kind::finish) vote[1] = 1;
  dist_->max(vote);
  const int code = static_cast<int>(vote[0].item<double>());
  if (code > 0) {
    if (local && local->kind == StopRequest::Kind::interrupt && local->exit_code == code) return local;
    return StopRequest{.kind = StopRequest::Kind::interrupt, .exit_code = code, .state = "interrupted",
                       .message = fmt::format("{} received by another rank", code == 143 ? "SIGTERM" : code == 130 ? "SIGINT" : "a stop signal")};
  }
  if (vote[1].item<double>() > 0) {
    if (local) return local;
    return StopRequest{.kind = StopRequest::Kind::finish, .exit_code = 0, .state = "stopped", .message = "another rank ended the run"};
  }
  return std::nullopt;
}

void RankAgreement::align_models(torch::nn::Module& trained, torch::nn::Module* ema, int epoch) {
  if (!dist_) return;
  check_weights_agree(*dist_, trained, epoch);
  average_batch_norm_statistics(*dist_, trained);
  if (ema) average_batch_norm_statistics(*dist_, *ema);
}

std::string RankAgreement::describe_failure(const std::exception& error) const {
  return dist_ ? dist_->describe_failure(error) : std::string(error.what());
}

}  // namespace libreyolo::train
