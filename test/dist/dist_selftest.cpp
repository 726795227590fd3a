// One rank of a data-parallel self-test: rendezvous through the launcher's variables (torchrun,
// Slurm, or set by hand), then an all-reduce and a broadcast over c10d's Gloo backend, checked
// against their definitions. Prints "rank R/W ok" or exits 1.
#include "core/error.h"
#include "dist/launch_env.h"
#include "dist/process_group.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <chrono>
#include <exception>

int main(int argc, char** argv) {
  try {
    const auto env = libreyolo::dist::resolve_launch_env(libreyolo::dist::process_environment());
    libreyolo::dist::GroupOptions options;
    if (argc > 1) options.timeout = std::chrono::seconds(std::atoi(argv[1]));
    libreyolo::dist::Group group(env, options);
    const int r = env.rank, w = env.world_size;
    std::vector<at::Tensor> sum{at::full({1000}, static_cast<float>(r + 1))};
    group.group().allreduce(sum)->wait();
    const float expected = static_cast<float>(w * (w + 1) / 2);
    if (!at::allclose(sum[0], at::full({1000}, expected))) {
      fmt::print(stderr, "rank {}: all-reduce gave {}, expected {}\n", r, sum[0][0].item<float>(), expected);
      return 1;
    }
    std::vector<at::Tensor> shared{r == 0 ? at::arange(10, at::kFloat) : at::zeros({10})};
    group.group().broadcast(shared)->wait();
    if (!at::equal(shared[0], at::arange(10, at::kFloat))) {
      fmt::print(stderr, "rank {}: broadcast from rank 0 did not arrive\n", r);
      return 1;
    }
    group.group().barrier()->wait();
    fmt::print("rank {}/{} ok ({}, local rank {}, master {}:{})\n", r, w, env.launcher, env.local_rank, env.master_addr,
               env.master_port);
    return 0;
  } catch (...) {
    return libreyolo::report_error(std::current_exception());
  }
}
