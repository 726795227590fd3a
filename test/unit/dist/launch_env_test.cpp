#include "dist/launch_env.h"

#include "core/error.h"

#include <map>

#include "catch.h"  // last: see catch.h

using libreyolo::dist::first_slurm_host;
using libreyolo::dist::resolve_launch_env;

namespace {

libreyolo::dist::Lookup variables(std::map<std::string, std::string> values) {
  return [values](const std::string& name) -> std::optional<std::string> {
    const auto found = values.find(name);
    if (found == values.end()) return std::nullopt;
    return found->second;
  };
}

}  // namespace

TEST_CASE("launch env: one process without a launcher", "[launch_env]") {
  const auto env = resolve_launch_env(variables({}));
  CHECK(env.launcher == "none");
  CHECK_FALSE(env.distributed());
  CHECK(env.rank == 0);
  CHECK(env.world_size == 1);
  CHECK(env.master_port == 29500);
}

TEST_CASE("launch env: torchrun's variables", "[launch_env]") {
  const auto env = resolve_launch_env(variables({{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"},
                                                 {"LOCAL_WORLD_SIZE", "2"}, {"MASTER_ADDR", "10.0.0.7"},
                                                 {"MASTER_PORT", "29600"}}));
  CHECK(env.launcher == "torchrun");
  CHECK(env.distributed());
  CHECK(env.rank == 3);
  CHECK(env.world_size == 4);
  CHECK(env.local_rank == 1);
  CHECK(env.local_world_size == 2);
  CHECK(env.master_addr == "10.0.0.7");
  CHECK(env.master_port == 29600);
}

TEST_CASE("launch env: Slurm's variables, the first host of the node list as master", "[launch_env]") {
  const auto env = resolve_launch_env(variables({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "1"},
                                                 {"SLURM_NTASKS_PER_NODE", "4(x2)"},
                                                 {"SLURM_JOB_NODELIST", "gpu[07-08]"}}));
  CHECK(env.launcher == "slurm");
  CHECK(env.rank == 5);
  CHECK(env.world_size == 8);
  CHECK(env.local_rank == 1);
  CHECK(env.local_world_size == 4);
  CHECK(env.master_addr == "gpu07");
  // MASTER_ADDR wins over the node list; torchrun's variables win over Slurm's
  CHECK(resolve_launch_env(variables({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_JOB_NODELIST", "a,b"},
                                      {"MASTER_ADDR", "head"}}))
            .master_addr == "head");
  CHECK(resolve_launch_env(variables({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"RANK", "0"}, {"WORLD_SIZE", "1"}}))
            .launcher == "torchrun");
}

TEST_CASE("launch env: Slurm node lists", "[launch_env]") {
  CHECK(first_slurm_host("node[01-04,07],gpu5") == "node01");
  CHECK(first_slurm_host("gpu5,node[01-04]") == "gpu5");
  CHECK(first_slurm_host("a,b") == "a");
  CHECK(first_slurm_host("n[3]") == "n3");
  CHECK(first_slurm_host("rack1-n[10,12]") == "rack1-n10");
  CHECK(first_slurm_host("").empty());
}

TEST_CASE("launch env: values out of range name the variable", "[launch_env]") {
  CHECK_THROWS_WITH(resolve_launch_env(variables({{"RANK", "2"}, {"WORLD_SIZE", "2"}})),
                    Catch::Contains("RANK=2 is not a whole number from 0 to 1"));
  CHECK_THROWS_WITH(resolve_launch_env(variables({{"RANK", "0"}, {"WORLD_SIZE", "two"}})),
                    Catch::Contains("WORLD_SIZE=two"));
  CHECK_THROWS_WITH(resolve_launch_env(variables({{"MASTER_PORT", "70000"}})), Catch::Contains("MASTER_PORT=70000"));
  CHECK_THROWS_AS(resolve_launch_env(variables({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "0"}})), libreyolo::UsageError);
}
