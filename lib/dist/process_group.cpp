#include "dist/process_group.h"

#include "core/error.h"

#include <fmt/format.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
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

}  // namespace

Group::Group(const LaunchEnv& env, const GroupOptions& options) : env_(env), state_(std::make_unique<State>()) {
  if (options.backend != "gloo") {
    throw UsageError(fmt::format("dist_backend={} is not built yet; use gloo", options.backend));
  }
  state_->store = open_store(env, options.timeout);
  auto gloo_options = c10d::ProcessGroupGloo::Options::create(options.timeout);
  gloo_options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(
      env.master_addr == "localhost" || env.master_addr.rfind("127.", 0) == 0 ? "127.0.0.1" : env.master_addr));
  auto backend = c10::make_intrusive<c10d::ProcessGroupGloo>(state_->store, env.rank, env.world_size, gloo_options);
  state_->group = c10::make_intrusive<c10d::ProcessGroup>(state_->store, env.rank, env.world_size);
  state_->group->setBackend(c10::DeviceType::CPU, c10d::ProcessGroup::BackendType::GLOO, backend);
  state_->group->setDefaultBackend(c10d::ProcessGroup::BackendType::GLOO);
}

Group::~Group() = default;

c10d::ProcessGroup& Group::group() { return *state_->group; }
c10d::Store& Group::store() { return *state_->store; }
const c10::intrusive_ptr<c10d::ProcessGroup>& Group::handle() const { return state_->group; }

}  // namespace libreyolo::dist
