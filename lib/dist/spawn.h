// The self-spawn launcher (`device=0,1`, or `nproc_per_node=2` on the CPU): starts one process per
// local rank with the variables torchrun would set, so that each reads them as under torchrun.
// The console reads like one run: the ranks' stderr and stdout go to the launcher's stderr, rank
// 0's lines as they are, the others' prefixed "[rank N] "; only rank 0's stdout stays the
// launcher's stdout (results such as json=true). Ctrl-C and SIGTERM are forwarded to every rank; when one rank fails, the others get
// SIGTERM (then SIGKILL after a grace period) and the launcher exits with the failed rank's code,
// naming it and showing its last lines. The rank named is the one that failed by itself: not one
// that only lost contact with it (a peer's death or hang makes the others fail too, often first),
// and one that did not end when asked is named as having stopped responding.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace libreyolo::dist {

struct SpawnOptions {
  int nproc = 2;                  // ranks on this node
  int nnodes = 1, node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;            // 0: a free port, found by binding port 0
  std::chrono::seconds grace{10};  // how long the others get to stop after one rank failed
  int tail_lines = 20;            // a failed rank's last lines in the message
  // Called with the failure's message (the one printed) when a rank failed, after every rank ended:
  // where the run's status.json may still say "running" (rank 0 itself was killed).
  std::function<void(const std::string& message, int failed_rank)> on_failure;
};

// A port nobody listens on at `address` now (the kernel's pick for port 0).
int pick_free_port(const std::string& address);

// Runs `argv` (argv[0] a path) once per local rank and waits for all of them. Returns the exit
// code for the launcher: 0, the failed rank's code, or 128 + the signal that stopped the run.
int spawn_ranks(const std::vector<std::string>& argv, const SpawnOptions& options);

}  // namespace libreyolo::dist
