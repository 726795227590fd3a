// The Hungarian matcher's solver on its own: optimal totals against brute force (every injective
// map of a small matrix), wide and tall, SciPy's documented answers where costs tie (a constant
// matrix gives the identity), forbidden pairs, and the errors. test/parity/ checks the very pairs
// against SciPy. Then the matcher built on it: costs, per-image targets, no targets.
#include "core/error.h"
#include "models/detr_common/linear_assignment.h"
#include "models/detr_common/matcher.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "catch.h"  // last: see catch.h

using libreyolo::models::detr::Assignment;
using libreyolo::models::detr::linear_sum_assignment;

namespace {

// The least total over every way to match min(rows, cols) pairs, by trying them all.
double brute_force_total(const std::vector<double>& cost, int rows, int cols) {
  const bool wide = rows <= cols;
  const int small = wide ? rows : cols, large = wide ? cols : rows;
  std::vector<int> pick(static_cast<std::size_t>(large));
  std::iota(pick.begin(), pick.end(), 0);
  double best = std::numeric_limits<double>::infinity();
  do {  // the first `small` of each permutation of the larger side
    double total = 0;
    for (int k = 0; k < small; ++k) total += wide ? cost[k * cols + pick[k]] : cost[pick[k] * cols + k];
    best = std::min(best, total);
  } while (std::next_permutation(pick.begin(), pick.end()));
  return best;
}

double total_of(const Assignment& a, const std::vector<double>& cost, int cols) {
  double total = 0;
  for (std::size_t k = 0; k < a.rows.size(); ++k) total += cost[static_cast<std::size_t>(a.rows[k] * cols + a.cols[k])];
  return total;
}

void check_is_matching(const Assignment& a, int rows, int cols) {
  REQUIRE(a.rows.size() == static_cast<std::size_t>(std::min(rows, cols)));
  REQUIRE(a.cols.size() == a.rows.size());
  CHECK(std::is_sorted(a.rows.begin(), a.rows.end()));
  std::vector<std::int64_t> used_rows = a.rows, used_cols = a.cols;
  std::sort(used_cols.begin(), used_cols.end());
  CHECK(std::adjacent_find(used_rows.begin(), used_rows.end()) == used_rows.end());
  CHECK(std::adjacent_find(used_cols.begin(), used_cols.end()) == used_cols.end());
  for (std::size_t k = 0; k < a.rows.size(); ++k) {
    CHECK((a.rows[k] >= 0 && a.rows[k] < rows && a.cols[k] >= 0 && a.cols[k] < cols));
  }
}

}  // namespace

TEST_CASE("linear assignment: the least total, wide, tall and square, against brute force", "[assignment]") {
  std::mt19937 random(7);
  std::uniform_real_distribution<double> real(0.0, 10.0);
  std::uniform_int_distribution<int> small_integer(0, 2);  // ties everywhere
  for (int trial = 0; trial < 300; ++trial) {
    const int rows = 1 + trial % 6, cols = 1 + (trial / 6) % 6;
    std::vector<double> cost(static_cast<std::size_t>(rows * cols));
    for (auto& c : cost) c = trial % 2 ? real(random) : small_integer(random);
    const Assignment a = linear_sum_assignment(cost.data(), rows, cols);
    INFO(rows << "x" << cols << " trial " << trial);
    check_is_matching(a, rows, cols);
    CHECK(total_of(a, cost, cols) == Approx(brute_force_total(cost, rows, cols)).margin(1e-9));
  }
}

TEST_CASE("linear assignment: SciPy's answers where costs tie, forbidden pairs, tensors", "[assignment]") {
  // a constant matrix: the identity (SciPy scans columns from the last, which gives it)
  const std::vector<double> constant(12, 3.0);
  const Assignment square = linear_sum_assignment(constant.data(), 3, 4);
  CHECK(square.cols == std::vector<std::int64_t>{0, 1, 2});
  const Assignment tall = linear_sum_assignment(constant.data(), 4, 3);
  CHECK(tall.rows == std::vector<std::int64_t>{0, 1, 2});
  CHECK(tall.cols == std::vector<std::int64_t>{0, 1, 2});
  // +inf forbids a pair: the only finite way
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> forbidden{inf, 1, 5, inf};
  const Assignment around = linear_sum_assignment(forbidden.data(), 2, 2);
  CHECK(around.cols == std::vector<std::int64_t>{1, 0});
  // a float tensor, as the matcher builds it
  const at::Tensor cost = at::tensor({4.0f, 1.0f, 3.0f, 2.0f, 0.0f, 5.0f, 3.0f, 2.0f, 2.0f}).view({3, 3});
  const Assignment from_tensor = linear_sum_assignment(cost);
  CHECK(from_tensor.cols == std::vector<std::int64_t>{1, 0, 2});  // SciPy's documented example: total 5
  CHECK(linear_sum_assignment(at::zeros({0, 4})).rows.empty());
}

TEST_CASE("linear assignment: NaN, -inf and infeasible matrices are refused as SciPy refuses them", "[assignment]") {
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> with_nan{1, std::nan(""), 2, 3};
  CHECK_THROWS_AS(linear_sum_assignment(with_nan.data(), 2, 2), libreyolo::RuntimeError);
  const std::vector<double> with_minus_inf{1, -inf, 2, 3};
  CHECK_THROWS_WITH(linear_sum_assignment(with_minus_inf.data(), 2, 2), Catch::Contains("row 0, column 1"));
  const std::vector<double> infeasible{inf, inf, 1, 2};  // row 0 has no column
  CHECK_THROWS_WITH(linear_sum_assignment(infeasible.data(), 2, 2), Catch::Contains("infeasible"));
  CHECK_THROWS_AS(linear_sum_assignment(at::zeros({2, 2, 2})), libreyolo::RuntimeError);
}

TEST_CASE("matcher: a query on a target's box with its class wins it; images keep their own targets", "[assignment]") {
  using namespace libreyolo::models::detr;
  // 2 images x 4 queries x 3 classes; image 0 has 2 targets, image 1 none, image 2 one
  at::Tensor logits = at::full({3, 4, 3}, -4.0);
  at::Tensor boxes = at::tensor({0.5, 0.5, 0.2, 0.2}).to(at::kFloat).repeat({3, 4, 1});
  const at::Tensor classes = at::tensor({2, 0, 1}, at::kLong);
  const at::Tensor target_boxes = at::tensor({0.2, 0.3, 0.1, 0.2, 0.7, 0.6, 0.3, 0.3, 0.4, 0.4, 0.2, 0.1}).to(at::kFloat).view({3, 4});
  // image 0: query 3 predicts target 0 (class 2 at its box), query 1 target 1; image 2: query 2 its only target
  logits[0][3][2] = 4.0;
  boxes[0][3] = target_boxes[0];
  logits[0][1][0] = 4.0;
  boxes[0][1] = target_boxes[1];
  logits[2][2][1] = 4.0;
  boxes[2][2] = target_boxes[2];
  const DetrTargets targets{classes, target_boxes, {2, 0, 1}};
  const at::Tensor cost = matching_cost(logits, boxes, targets);
  REQUIRE(cost.sizes() == at::IntArrayRef({3, 4, 3}));
  const auto assignments = assign_queries(cost, targets.counts);
  REQUIRE(assignments.size() == 3);
  CHECK(assignments[0].rows == std::vector<std::int64_t>{1, 3});
  CHECK(assignments[0].cols == std::vector<std::int64_t>{1, 0});
  CHECK(assignments[1].rows.empty());
  CHECK(assignments[2].rows == std::vector<std::int64_t>{2});
  CHECK(assignments[2].cols == std::vector<std::int64_t>{0});  // counted from the image's own first target
  // a perfect box has GIoU 1 and L1 0: its cost is the class term less 2
  CHECK(cost[0][3][0].item<double>() < cost[0][0][0].item<double>() - 2);

  CHECK_FALSE(matching_cost(logits, boxes, DetrTargets{at::empty({0}, at::kLong), at::empty({0, 4}), {0, 0, 0}}).defined());
  CHECK(match(logits, boxes, DetrTargets{at::empty({0}, at::kLong), at::empty({0, 4}), {0, 0, 0}}).size() == 3);
  CHECK_THROWS_AS(matching_cost(logits, boxes, DetrTargets{classes, target_boxes, {2, 0, 2}}), libreyolo::RuntimeError);
}
