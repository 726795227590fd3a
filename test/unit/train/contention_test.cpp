#include "train/contention.h"

#include "catch.h"  // last: see catch.h

using libreyolo::train::ThreadGovernor;

TEST_CASE("contention: the governor halves the threads while the run waits for CPUs", "[contention]") {
  ThreadGovernor governor(8);
  CHECK_FALSE(governor.observe(0.02));  // alone: nothing changes
  CHECK(governor.observe(1.0) == 4);    // another process wants the cores
  CHECK(governor.observe(0.9) == 2);
  CHECK(governor.observe(0.8) == 1);
  CHECK_FALSE(governor.observe(0.8));   // one thread is the floor
  CHECK(governor.threads() == 1);
}

TEST_CASE("contention: the full count comes back after quiet samples, later after a failed try", "[contention]") {
  ThreadGovernor governor(2);
  CHECK(governor.observe(1.0) == 1);
  CHECK_FALSE(governor.observe(0.01));
  CHECK_FALSE(governor.observe(0.2));  // between calm and contended: the quiet count starts again
  CHECK_FALSE(governor.observe(0.01));
  CHECK_FALSE(governor.observe(0.01));
  CHECK(governor.observe(0.01) == 2);  // three quiet samples in a row
  CHECK(governor.observe(1.0) == 1);   // the other process is still there: back down
  for (int i = 0; i < 5; ++i) CHECK_FALSE(governor.observe(0.01));
  CHECK(governor.observe(0.01) == 2);  // six quiet samples now
}

TEST_CASE("contention: run-queue delay of this process is readable on Linux and grows", "[contention]") {
  const auto first = libreyolo::train::process_run_delay_seconds();
  if (!first) {
    WARN("no /proc/self/task/*/schedstat on this kernel: the hook stays off there");
    return;
  }
  const auto second = libreyolo::train::process_run_delay_seconds();
  REQUIRE(second);
  CHECK(*first >= 0);
  CHECK(*second >= *first);
}
