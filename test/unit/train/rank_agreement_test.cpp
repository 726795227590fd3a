// RankAgreement: what the ranks decide together. One process answers for itself; with a peer
// (a fake rank whose contribution each collective is given) the answers are the ranks' common ones.
#include "train/rank_agreement.h"

#include "core/error.h"

#include <ATen/ATen.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>

#include <deque>
#include <functional>

#include "catch.h"  // last: see catch.h

using namespace libreyolo;
using train::StopRequest;

namespace {

// Two ranks, this one and a peer: each collective combines this rank's tensor with the peer's,
// which the next queued function makes from ours (the peer's data as the test wants it).
class PeerCollectives final : public train::Collectives {
 public:
  using Peer = std::function<at::Tensor(const at::Tensor& mine)>;
  std::deque<Peer> peer;
  int calls = 0;
  int rank() const override { return 0; }
  int world_size() const override { return 2; }
  int local_rank() const override { return 0; }
  void sum(at::Tensor& tensor) override { tensor.add_(next(tensor)); }
  void max(at::Tensor& tensor) override { tensor.copy_(at::maximum(tensor, next(tensor))); }
  at::Tensor gather_rows(const at::Tensor& rows) override { return at::cat({rows, next(rows)}); }

 private:
  at::Tensor next(const at::Tensor& mine) {
    REQUIRE_FALSE(peer.empty());  // a collective this test did not expect
    ++calls;
    at::Tensor theirs = peer.front()(mine.clone());
    peer.pop_front();
    return theirs;
  }
};

PeerCollectives::Peer sends(std::vector<double> values) {
  return [values](const at::Tensor&) { return at::tensor(values, at::kDouble); };
}

StopRequest interrupt(int code) {
  return {.kind = StopRequest::Kind::interrupt, .exit_code = code, .state = "interrupted", .message = "mine"};
}

}  // namespace

TEST_CASE("In one process every answer is the rank's own and nothing is exchanged", "[rank_agreement]") {
  train::RankAgreement ranks(nullptr);
  CHECK_FALSE(ranks.distributed());
  CHECK(ranks.world_size() == 1);
  CHECK(ranks.any(true));
  CHECK_FALSE(ranks.any(false));
  std::vector<double> values{1.5, -2};
  ranks.mean(values);
  CHECK(values == std::vector<double>{1.5, -2});
  CHECK_FALSE(ranks.stop(std::nullopt));
  CHECK(ranks.stop(interrupt(130))->message == "mine");
  torch::nn::BatchNorm1d bn(2);
  bn->running_mean.fill_(3);
  ranks.align_models(*bn, nullptr, 0);
  CHECK(at::equal(bn->running_mean, at::full({2}, 3.0)));
  CHECK(ranks.describe_failure(RuntimeError("boom")) == "boom");
}

TEST_CASE("Two ranks: one's yes is everyone's, logged values are the mean", "[rank_agreement]") {
  PeerCollectives peers;
  train::RankAgreement ranks(&peers);
  CHECK(ranks.world_size() == 2);
  peers.peer = {sends({1}), sends({0})};
  CHECK(ranks.any(false));  // the peer saw a non-finite weight
  CHECK_FALSE(ranks.any(false));
  peers.peer = {sends({4, 0, 1})};
  std::vector<double> values{2, 3, 0};  // loss, a term, a gradient flag (0: not finite here)
  ranks.mean(values);
  CHECK(values == std::vector<double>{3, 1.5, 0.5});
  CHECK(peers.calls == 3);
}

TEST_CASE("Two ranks stop together: the peer's interrupt wins, with its exit code", "[rank_agreement]") {
  PeerCollectives peers;
  train::RankAgreement ranks(&peers);
  // [interrupt exit code, finish] as the peer votes
  peers.peer = {sends({0, 0}), sends({143, 0}), sends({143, 0}), sends({130, 0}), sends({0, 1}), sends({0, 1})};
  CHECK_FALSE(ranks.stop(std::nullopt));
  const auto sigterm = ranks.stop(std::nullopt);  // the peer got SIGTERM, this rank nothing
  REQUIRE(sigterm);
  CHECK(sigterm->kind == StopRequest::Kind::interrupt);
  CHECK(sigterm->exit_code == 143);
  CHECK(sigterm->message == "SIGTERM received by another rank");
  const auto higher = ranks.stop(interrupt(130));  // SIGINT here, SIGTERM there: SIGTERM's code
  CHECK(higher->exit_code == 143);
  CHECK(higher->message == "SIGTERM received by another rank");
  CHECK(ranks.stop(interrupt(130))->message == "mine");  // the same signal: this rank's own request
  const StopRequest finish{.kind = StopRequest::Kind::finish, .exit_code = 0, .state = "profiled", .message = "window done"};
  CHECK(ranks.stop(finish)->state == "profiled");
  const auto theirs = ranks.stop(std::nullopt);
  CHECK(theirs->kind == StopRequest::Kind::finish);
  CHECK(theirs->message == "another rank ended the run");
}

TEST_CASE("Before validation the ranks' weights are checked equal and BatchNorm statistics averaged", "[rank_agreement]") {
  torch::nn::Sequential trained(torch::nn::Linear(3, 2), torch::nn::BatchNorm1d(2));
  torch::nn::BatchNorm1d ema(2);
  auto* bn = dynamic_cast<torch::nn::BatchNorm1dImpl*>(trained->ptr(1).get());
  bn->running_mean.copy_(at::tensor({1.0f, 2.0f}));
  bn->running_var.copy_(at::tensor({4.0f, 4.0f}));
  ema->running_mean.fill_(10);
  PeerCollectives peers;
  train::RankAgreement ranks(&peers);
  const auto same_weights = [](const at::Tensor& mine) { return mine; };  // [checksum, -checksum]
  const auto thrice = [](const at::Tensor& mine) { return mine * 3; };    // the peer's statistics are 3x ours
  peers.peer = {same_weights, thrice, thrice};
  ranks.align_models(*trained, ema.get(), 4);
  CHECK(at::equal(bn->running_mean, at::tensor({2.0f, 4.0f})));
  CHECK(at::equal(bn->running_var, at::tensor({8.0f, 8.0f})));
  CHECK(bn->num_batches_tracked.item<std::int64_t>() == 0);  // not a float: not averaged
  CHECK(at::equal(ema->running_mean, at::full({2}, 20.0f)));
  CHECK(peers.calls == 3);

  peers.peer = {[](const at::Tensor& mine) { return mine + at::tensor({1e-6, 0.0}, at::kDouble); }};  // a drifted rank
  CHECK_THROWS_WITH(ranks.align_models(*trained, nullptr, 4), Catch::Contains("the ranks' weights differ after epoch 5"));
}
