#include "dist/launch_env.h"

#include "core/error.h"

#include <fmt/format.h>

#include <charconv>
#include <cstdlib>

namespace libreyolo::dist {

namespace {

int integer(const Lookup& lookup, const std::string& name, int fallback, int minimum, int maximum) {
  const auto text = lookup(name);
  if (!text) return fallback;
  int value = 0;
  const auto [end, error] = std::from_chars(text->data(), text->data() + text->size(), value);
  if (error != std::errc() || end != text->data() + text->size() || value < minimum || value > maximum) {
    throw UsageError(fmt::format("environment variable {}={} is not a whole number from {} to {}; check the launcher "
                                 "(torchrun or srun) that started libreyolo",
                                 name, *text, minimum, maximum));
  }
  return value;
}

// SLURM_NTASKS_PER_NODE: "4" or "4(x2)" or "2,1": the first group's count.
std::optional<std::string> first_count(const std::optional<std::string>& text) {
  if (!text) return std::nullopt;
  const auto end = text->find_first_of("(,");
  return end == std::string::npos ? *text : text->substr(0, end);
}

}  // namespace

Lookup process_environment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr || *value == '\0') return std::nullopt;
    return std::string(value);
  };
}

std::string first_slurm_host(const std::string& nodelist) {
  // up to the first comma outside brackets; a bracket range keeps its prefix and first number
  std::size_t depth = 0, end = 0;
  for (; end < nodelist.size(); ++end) {
    if (nodelist[end] == '[') ++depth;
    if (nodelist[end] == ']' && depth) --depth;
    if (nodelist[end] == ',' && depth == 0) break;
  }
  const std::string first = nodelist.substr(0, end);
  const auto open = first.find('[');
  if (open == std::string::npos) return first;
  const std::string prefix = first.substr(0, open);
  const std::string ranges = first.substr(open + 1, first.find(']', open) - open - 1);
  const auto stop = ranges.find_first_of("-,");
  return prefix + (stop == std::string::npos ? ranges : ranges.substr(0, stop));
}

LaunchEnv resolve_launch_env(const Lookup& lookup) {
  LaunchEnv env;
  constexpr int kMaxRanks = 1 << 20;
  if (lookup("RANK") || lookup("WORLD_SIZE")) {
    env.launcher = "torchrun";
    env.world_size = integer(lookup, "WORLD_SIZE", 1, 1, kMaxRanks);
    env.rank = integer(lookup, "RANK", 0, 0, env.world_size - 1);
    env.local_world_size = integer(lookup, "LOCAL_WORLD_SIZE", env.world_size, 1, env.world_size);
    env.local_rank = integer(lookup, "LOCAL_RANK", env.rank % env.local_world_size, 0, env.local_world_size - 1);
  } else if (lookup("SLURM_PROCID") && lookup("SLURM_NTASKS")) {
    env.launcher = "slurm";
    env.world_size = integer(lookup, "SLURM_NTASKS", 1, 1, kMaxRanks);
    env.rank = integer(lookup, "SLURM_PROCID", 0, 0, env.world_size - 1);
    const Lookup per_node = [&](const std::string&) { return first_count(lookup("SLURM_NTASKS_PER_NODE")); };
    env.local_world_size = integer(per_node, "SLURM_NTASKS_PER_NODE", env.world_size, 1, env.world_size);
    env.local_rank = integer(lookup, "SLURM_LOCALID", env.rank % env.local_world_size, 0, env.local_world_size - 1);
    if (const auto nodes = lookup("SLURM_JOB_NODELIST"); nodes && !lookup("MASTER_ADDR")) {
      if (const std::string host = first_slurm_host(*nodes); !host.empty()) env.master_addr = host;
    }
  }
  if (const auto address = lookup("MASTER_ADDR")) env.master_addr = *address;
  env.master_port = integer(lookup, "MASTER_PORT", env.master_port, 1, 65535);
  return env;
}

}  // namespace libreyolo::dist
