// parallel_for: every item once, and a worker's exception reaches the caller (no std::terminate).
#include "core/parallel.h"

#include <atomic>
#include <stdexcept>
#include <vector>

#include "catch.h"  // last: see catch.h

TEST_CASE("parallel_for runs every item once and rethrows a worker's error", "[parallel]") {
  std::vector<std::atomic<int>> seen(100);
  libreyolo::parallel_for(seen.size(), 4, [&](std::size_t i) { ++seen[i]; });
  for (const auto& s : seen) CHECK(s == 1);
  CHECK_THROWS_WITH(libreyolo::parallel_for(50, 3, [](std::size_t i) {
                      if (i == 17) throw std::runtime_error("item 17 failed");
                    }),
                    "item 17 failed");
  libreyolo::parallel_for(0, 4, [](std::size_t) { FAIL("no items"); });
}
