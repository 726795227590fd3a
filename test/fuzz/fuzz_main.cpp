// libFuzzer entry (clang, -Dfuzzing=true). One binary for every target, picked by
// LIBREYOLO_FUZZ_TARGET: libreyolo_fuzz takes libFuzzer's own flags (-max_total_time=, corpus dirs).
#include "fuzz_targets.h"

#include <cstdio>
#include <cstdlib>

namespace {
const libreyolo::fuzz::NamedTarget* target = nullptr;
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* name = std::getenv("LIBREYOLO_FUZZ_TARGET");
  target = name ? libreyolo::fuzz::find_target(name) : nullptr;
  if (!target) {
    std::fprintf(stderr, "set LIBREYOLO_FUZZ_TARGET to one of:");
    for (const auto& t : libreyolo::fuzz::kTargets) std::fprintf(stderr, " %.*s", static_cast<int>(t.name.size()), t.name.data());
    std::fprintf(stderr, "\n");
    std::exit(2);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  target->run(data, size);
  return 0;
}
