// What the ranks of a data-parallel run must agree on for the loop to stay one run: the decisions
// every rank takes alike (stop, divergence, the logged values), and the state they must share
// before a model is judged or saved (the weights checked equal, BatchNorm statistics averaged).
// The loop asks these questions the same way in one process, where every answer is its own.
// Every call is a collective in a data-parallel run: all ranks make it, in the same order.
#pragma once

#include "train/collectives.h"
#include "train/hooks.h"

#include <torch/nn/module.h>

#include <exception>
#include <optional>
#include <string>
#include <vector>

namespace libreyolo::train {

class RankAgreement {
 public:
  explicit RankAgreement(Collectives* dist) : dist_(dist) {}
  bool distributed() const { return dist_ != nullptr; }
  int world_size() const { return dist_ ? dist_->world_size() : 1; }

  // Whether any rank says yes.
  bool any(bool local);
  // The values' mean over the ranks, in place (a step's logged losses: every rank judges the same).
  void mean(std::vector<double>& values);
  // A stop one rank was asked for (Ctrl-C reaches each rank, not necessarily in the same step)
  // becomes every rank's: an interrupt wins over a finish, the highest exit code (SIGTERM's) over
  // the others; a rank that was not asked itself gets a request that says another rank was.
  std::optional<StopRequest> stop(std::optional<StopRequest> local);
  // Before validation and saving: the trained weights checked bit-identical on every rank
  // (RuntimeError naming the epoch otherwise), then the BatchNorm statistics of `trained` and
  // `ema` (may be null) averaged over the ranks (YOLOX's all_reduce_norm; with sync_bn they
  // already agree and the mean leaves them). `epoch`: 0-based, for the message.
  void align_models(torch::nn::Module& trained, torch::nn::Module* ema, int epoch);
  // A failure as status.json says it (a peer that went away in words).
  std::string describe_failure(const std::exception& error) const;

 private:
  Collectives* dist_;
};

}  // namespace libreyolo::train
