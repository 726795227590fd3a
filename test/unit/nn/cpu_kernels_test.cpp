// The ISA-level switches take effect: under `meson test --setup isa<level>` (test/meson.build)
// ATen's kernels, ours and oneDNN's run that level, or this test fails, so a suite run at a level
// cannot quietly have run another.
#include "nn/cpu_kernels.h"

#include <ATen/Version.h>
#include <ATen/native/verbose_wrapper.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "catch.h"  // last: see catch.h

using namespace libreyolo;

namespace {

struct Level {
  const char* aten;     // ATen's capability name
  const char* onednn;   // a piece of oneDNN's verbose "isa:" line at that level
  const char* not_onednn = nullptr;  // and one it must not hold
};

const std::map<std::string, Level>& levels() {
  static const std::map<std::string, Level> table{
      {"default", {"DEFAULT", "SSE4.1"}},
      {"avx2", {"AVX2", "Intel AVX2"}},
      {"avx512", {"AVX512", "AVX512BW, AVX512VL, and AVX512DQ"}},
      {"avx512bf16", {"AVX512", "bfloat16 support", "AMX"}},
      {"amx", {"AVX512", "Intel AMX"}},
  };
  return table;
}

// What oneDNN prints to stdout (its verbose mode) while a convolution runs.
std::string onednn_verbose_of_a_convolution() {
  std::fflush(stdout);
  char path[] = "/tmp/libreyolo_isa_XXXXXX";
  const int file = ::mkstemp(path);
  REQUIRE(file >= 0);
  const int saved = ::dup(1);
  ::dup2(file, 1);
  torch::verbose::_mkldnn_set_verbose(1);
  {
    torch::NoGradGuard no_grad;
    const torch::Tensor x = torch::randn({8, 64, 32, 32}), w = torch::randn({64, 64, 3, 3});
    (void)torch::conv2d(x, w, {}, 1, 1).sum().item<float>();
  }
  torch::verbose::_mkldnn_set_verbose(0);
  std::fflush(stdout);
  ::dup2(saved, 1);
  ::close(saved);
  ::close(file);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::remove(path);
  return text.str();
}

}  // namespace

TEST_CASE("our CPU kernels run the capability ATen runs", "[isa]") {
  CHECK(std::string(nn::cpu_kernels_name(nn::cpu_kernels())) == at::get_cpu_capability());
}

TEST_CASE("a test setup's ISA level is the level ATen, our kernels and oneDNN run", "[isa]") {
  const char* requested = std::getenv("LIBREYOLO_ISA_LEVEL");
  if (requested == nullptr) return;  // the plain suite: the CPU's own level
  INFO("LIBREYOLO_ISA_LEVEL=" << requested << " (scripts/isa-levels.sh lists what this CPU runs)");
  const auto level = levels().find(requested);
  REQUIRE(level != levels().end());
  CHECK(at::get_cpu_capability() == level->second.aten);
  CHECK(std::string(nn::cpu_kernels_name(nn::cpu_kernels())) == level->second.aten);
  const std::string verbose = onednn_verbose_of_a_convolution();
  const auto at = verbose.find("isa:");
  REQUIRE(at != std::string::npos);
  const std::string isa = verbose.substr(at, verbose.find('\n', at) - at);
  INFO("oneDNN: " << isa);
  CHECK(isa.find(level->second.onednn) != std::string::npos);
  if (level->second.not_onednn != nullptr) CHECK(isa.find(level->second.not_onednn) == std::string::npos);
}
