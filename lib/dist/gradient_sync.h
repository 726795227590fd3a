// Data-parallel gradients through c10d's own Reducer, the one PyTorch DDP uses, attached to the
// trainer as a hook: parameters and buffers are broadcast from rank 0 when training starts; every
// micro-step that ends an accumulation window arms the Reducer before backward, whose autograd
// hooks then all-reduce the gradients in buckets (about 25 MB, the first 1 MB) while backward
// still runs and leave every rank with their mean. Micro-steps inside a window are not armed:
// their gradients accumulate locally (DDP's no_sync), and the window's last step averages the sum.
// A family whose steps may leave parameters without a gradient (RT-DETR) arms it with the loss
// instead, and the Reducer finds those from the loss's graph (DDP's find_unused_parameters).
#pragma once

#include "dist/process_group.h"
#include "train/hooks.h"

#include <memory>

namespace c10d {
class Logger;
class Reducer;
}

namespace libreyolo::dist {

class GradientSync final : public train::TrainHook {
 public:
  explicit GradientSync(Group& group, std::int64_t bucket_bytes = 25 << 20, std::int64_t first_bucket_bytes = 1 << 20);
  ~GradientSync() override;

  void on_train_start(const train::RunInfo& info, const train::TrainState& state) override;
  void on_step_start(const train::TrainState& state) override;
  void on_phase_start(train::Phase phase) override;
  void before_backward(const at::Tensor& loss) override;
  // result["data_parallel"]: world size, buckets and the bytes each optimizer step all-reduces.
  void on_train_end(const train::TrainState& state, nlohmann::ordered_json& result) override;

  // Parameters and buffers from rank 0 (at the start and after a resume).
  void broadcast_state(torch::nn::Module& module);

 private:
  Group& group_;
  std::int64_t bucket_bytes_, first_bucket_bytes_;
  std::shared_ptr<c10d::Reducer> reducer_;
  std::shared_ptr<c10d::Logger> logger_;
  bool sync_step_ = true;
  bool find_unused_ = false;
  std::int64_t gradient_bytes_ = 0;
  std::size_t buckets_ = 0;
};

}  // namespace libreyolo::dist
