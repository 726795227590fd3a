#include "dist/gradient_sync.h"

#include "core/error.h"
#include "core/log.h"
#include "train/train_state.h"

#include <fmt/format.h>
#include <torch/csrc/distributed/c10d/comm.hpp>
#include <torch/csrc/distributed/c10d/logger.hpp>
#include <torch/csrc/distributed/c10d/reducer.hpp>
#include <torch/nn/module.h>

namespace libreyolo::dist {

GradientSync::GradientSync(Group& group, std::int64_t bucket_bytes, std::int64_t first_bucket_bytes)
    : group_(group), bucket_bytes_(bucket_bytes), first_bucket_bytes_(first_bucket_bytes) {}

GradientSync::~GradientSync() = default;

void GradientSync::broadcast_state(torch::nn::Module& module) {
  std::vector<at::Tensor> tensors;
  for (const auto& parameter : module.parameters()) tensors.push_back(parameter.detach());
  for (const auto& buffer : module.buffers()) tensors.push_back(buffer.detach());
  if (!tensors.empty()) c10d::broadcast_coalesced(group_.handle(), tensors, static_cast<std::size_t>(256) << 20, 0);
}

void GradientSync::on_train_start(const train::RunInfo& info, const train::TrainState&) {
  if (info.model == nullptr) throw RuntimeError("data-parallel training needs the trained module (RunInfo.model)");
  broadcast_state(*info.model);
  std::vector<at::Tensor> parameters;
  for (const auto& parameter : info.model->parameters()) {
    if (parameter.requires_grad()) parameters.push_back(parameter);
  }
  const std::vector<bool> sparse(parameters.size(), false);
  const auto [buckets, limits] = c10d::compute_bucket_assignment_by_size(
      parameters, {static_cast<std::size_t>(first_bucket_bytes_), static_cast<std::size_t>(bucket_bytes_)}, sparse);
  gradient_bytes_ = 0;
  for (const auto& p : parameters) gradient_bytes_ += p.numel() * static_cast<std::int64_t>(p.element_size());
  buckets_ = buckets.size();
  log::info("Gradient sync: {} tensors in {} buckets, {:.1f} MB all-reduced per optimizer step ({} processes)",
            parameters.size(), buckets_, static_cast<double>(gradient_bytes_) / 1e6, group_.world_size());
  find_unused_ = info.may_leave_parameters_unused;
  reducer_ = std::make_shared<c10d::Reducer>(parameters, buckets, group_.handle(), sparse, bucket_bytes_,
                                             /*find_unused_parameters=*/find_unused_, /*gradient_as_bucket_view=*/false,
                                             std::unordered_map<std::size_t, std::string>{}, first_bucket_bytes_,
                                             /*skip_all_reduce_unused_params=*/false, /*use_python_reducer=*/false,
                                             std::vector<std::int64_t>(limits.begin(), limits.end()));
  // the reducer's logger (DistributedDataParallel sets one): searching for unused parameters records there
  logger_ = std::make_shared<c10d::Logger>(reducer_);
  reducer_->set_logger(logger_);
}

void GradientSync::on_step_start(const train::TrainState& state) {
  sync_step_ = state.window_ends();
}

void GradientSync::on_phase_start(train::Phase phase) {
  if (!reducer_) return;
  if (phase == train::Phase::forward) reducer_->prepare_for_forward();
  // Armed only on a window's last micro-step: the others keep their gradients local (no_sync).
  if (phase == train::Phase::backward && sync_step_ && !find_unused_) reducer_->prepare_for_backward({});
}

// With parameters that may go unused, the reducer walks the loss's graph to find them (as
// DistributedDataParallel's find_unused_parameters): marked ready, their gradients all-reduced as zeros.
void GradientSync::before_backward(const at::Tensor& loss) {
  if (reducer_ && find_unused_ && sync_step_) reducer_->prepare_for_backward({loss});
}

void GradientSync::on_train_end(const train::TrainState&, nlohmann::ordered_json& result) {
  result["data_parallel"] = {{"world_size", group_.world_size()},
                             {"buckets", buckets_},
                             {"allreduce_bytes_per_step", gradient_bytes_}};
}

}  // namespace libreyolo::dist
