// dist_spawn NPROC PROGRAM [ARGS...]: the self-spawn launcher on its own (lib/dist/spawn.h), for
// the CLI test; `libreyolo train device=0,1` will call the same function.
#include "core/error.h"
#include "dist/spawn.h"

#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  try {
    libreyolo::dist::SpawnOptions options;
    options.nproc = std::atoi(argv[1]);
    options.grace = std::chrono::seconds(5);
    if (const char* port = std::getenv("SPAWN_MASTER_PORT")) options.master_port = std::atoi(port);
    return libreyolo::dist::spawn_ranks(std::vector<std::string>(argv + 2, argv + argc), options);
  } catch (...) {
    return libreyolo::report_error(std::current_exception());
  }
}
