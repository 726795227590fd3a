#include "dist/process_group.h"

#include "core/error.h"

#include <fmt/format.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

namespace libreyolo::dist {

struct Group::State {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroup> group;
};

namespace {

c10::intrusive_ptr<c10d::Store> open_store(const LaunchEnv& env, std::chrono::seconds timeout) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(env.master_port);
  options.isServer = env.rank == 0;
  options.numWorkers = static_cast<std::size_t>(env.world_size);
  options.waitWorkers = true;
  options.timeout = timeout;
  try {
    return c10::make_intrusive<c10d::TCPStore>(env.master_addr, options);
  } catch (const std::exception& error) {
    const std::string what = error.what();
    if (env.rank == 0 && (what.find("ddress already in use") != std::string::npos || what.find("EADDRINUSE") != std::string::npos)) {
      throw RuntimeError(fmt::format("master_port {} is in use (another training?): pass master_port=<free port> or let "
                                     "libreyolo pick one",
                                     env.master_port));
    }
    std::string first_line = what.substr(0, what.find('\n'));
    throw RuntimeError(fmt::format("rank {}: the rendezvous at {}:{} did not complete within {} s ({}); check that every "
                                   "rank was started with the same master_addr, master_port and world size",
                                   env.rank, env.master_addr, env.master_port, timeout.count(), first_line));
  }
}

c10::intrusive_ptr<c10d::Backend> gloo_backend(const c10::intrusive_ptr<c10d::Store>& store, const LaunchEnv& env,
                                                std::chrono::seconds timeout) {
  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(
      env.master_addr == "localhost" || env.master_addr.rfind("127.", 0) == 0 ? "127.0.0.1" : env.master_addr));
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, env.rank, env.world_size, options);
}

}  // namespace

bool nccl_compiled() {
#ifdef USE_C10D_NCCL
  return true;
#else
  return false;
#endif
}

Group::Group(const LaunchEnv& env, const GroupOptions& options) : env_(env), state_(std::make_unique<State>()) {
  if (options.backend != "gloo" && options.backend != "nccl") {
    throw UsageError(fmt::format("dist_backend={} is not a c10d backend: use auto, nccl or gloo", options.backend));
  }
  if (options.backend == "nccl" && !nccl_compiled()) {
    throw UsageError("dist_backend=nccl: this libreyolo was built without NCCL (no CUDA build or no nccl.h); use "
                     "dist_backend=gloo");
  }
  state_->store = open_store(env, options.timeout);
  state_->group = c10::make_intrusive<c10d::ProcessGroup>(state_->store, env.rank, env.world_size);
  // Gloo always carries the CPU tensors (stop votes, loss sums, gathered detections); with NCCL,
  // CUDA tensors (gradient buckets, SyncBatchNorm) go through NCCL. Each backend keeps its own keys.
  state_->group->setBackend(c10::DeviceType::CPU, c10d::ProcessGroup::BackendType::GLOO,
                            gloo_backend(c10::make_intrusive<c10d::PrefixStore>("gloo/", state_->store), env, options.timeout));
  state_->group->setDefaultBackend(c10d::ProcessGroup::BackendType::GLOO);
#ifdef USE_C10D_NCCL
  if (options.backend == "nccl") {
    auto nccl_options = c10d::ProcessGroupNCCL::Options::create();
    nccl_options->timeout = options.timeout;
    auto nccl = c10::make_intrusive<c10d::ProcessGroupNCCL>(c10::make_intrusive<c10d::PrefixStore>("nccl/", state_->store),
                                                            env.rank, env.world_size, nccl_options);
    state_->group->setBackend(c10::DeviceType::CUDA, c10d::ProcessGroup::BackendType::NCCL, nccl);
    state_->group->setDefaultBackend(c10d::ProcessGroup::BackendType::NCCL);
  }
#endif
}

Group::~Group() = default;

c10d::ProcessGroup& Group::group() { return *state_->group; }
c10d::Store& Group::store() { return *state_->store; }
const c10::intrusive_ptr<c10d::ProcessGroup>& Group::handle() const { return state_->group; }

}  // namespace libreyolo::dist
