// Where this process sits in a data-parallel run: rank, world, local rank and the rendezvous
// address, read from the variables torchrun (and Kubernetes' PyTorchJob) sets, else Slurm's.
// Pure: the variables come through a lookup function, so that every launcher is unit-tested.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace libreyolo::dist {

struct LaunchEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string launcher = "none";  // "torchrun", "slurm" or "none" (one process)
  bool distributed() const { return world_size > 1; }
};

using Lookup = std::function<std::optional<std::string>(const std::string& name)>;

// The process environment (getenv).
Lookup process_environment();

// torchrun's RANK / WORLD_SIZE / LOCAL_RANK / LOCAL_WORLD_SIZE / MASTER_ADDR / MASTER_PORT first;
// else Slurm's SLURM_PROCID / SLURM_NTASKS / SLURM_LOCALID / SLURM_NTASKS_PER_NODE and the first
// host of SLURM_JOB_NODELIST (unless MASTER_ADDR is set); else one process. Throws UsageError
// naming the variable for a value that is not a number in range.
LaunchEnv resolve_launch_env(const Lookup& lookup);

// "node[01-04,07],gpu5" -> "node01"; "a,b" -> "a"; "" -> "".
std::string first_slurm_host(const std::string& nodelist);

}  // namespace libreyolo::dist
