// The confusion matrix as Ultralytics counts it, and the plot files save_plots writes.
#include "eval/plots.h"

#include "catch.h"  // last: see catch.h

using namespace libreyolo::eval;

TEST_CASE("Confusion matrix: matches, misses, strays and low scores", "[plots]") {
  const std::vector<CocoBox> gt{{0, 0, 0, 0, 10, 10, 1}, {0, 1, 50, 50, 10, 10, 1}, {1, 1, 0, 0, 20, 20, 1}};
  const std::vector<CocoBox> dt{
      {0, 0, 0, 0, 10, 10, 0.9},   // class 0 found
      {0, 0, 50, 50, 10, 10, 0.8},  // class 1 taken for class 0
      {0, 1, 0, 0, 10, 10, 0.7},   // duplicate on the first box: a stray
      {1, 1, 0, 0, 20, 20, 0.2},   // under conf 0.25: not counted, so image 1's box is missed
      {1, 2, 100, 100, 5, 5, 0.6},  // nothing there
  };
  const auto m = confusion_matrix(gt, dt, 3);
  REQUIRE(m.size() == 4);
  CHECK(m[0][0] == 1);  // predicted 0, true 0
  CHECK(m[0][1] == 1);  // predicted 0, true 1
  CHECK(m[3][1] == 1);  // missed class 1 (image 1)
  CHECK(m[1][3] == 1);  // the duplicate
  CHECK(m[2][3] == 1);  // the stray class 2
  std::int64_t total = 0;
  for (const auto& row : m) for (const auto v : row) total += v;
  CHECK(total == 5);
}
