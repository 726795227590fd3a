// The Catch2 runner (v2: this file holds main; v3: catch2-with-main does) and one listener:
// every test case starts from the same random state, so a failure seen once is seen every time.
#include <ATen/ATen.h>

#if __has_include(<catch2/catch_all.hpp>)
#include <catch2/catch_all.hpp>
using ListenerBase = Catch::EventListenerBase;
#else
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
using ListenerBase = Catch::TestEventListenerBase;
#endif

namespace {
struct SeedEachTest : ListenerBase {
  using ListenerBase::ListenerBase;
  void testCaseStarting(const Catch::TestCaseInfo&) override { at::manual_seed(0); }
};
}  // namespace

CATCH_REGISTER_LISTENER(SeedEachTest)
