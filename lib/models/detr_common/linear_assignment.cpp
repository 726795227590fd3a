// The shortest-augmenting-path method (Crouse, "On implementing 2D rectangular assignment
// algorithms", 2016), with SciPy's choices where several columns tie, so that equal costs give
// SciPy's assignment: the columns are scanned from the last to the first, a tie for the nearest
// column goes to the last unmatched one scanned (else the first scanned), and a reached column
// leaves the scan list by taking the place of the list's last. A wide matrix solves directly; a
// tall one as its transpose.
#include "models/detr_common/linear_assignment.h"

#include "core/error.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace libreyolo::models::detr {

namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();
constexpr std::int64_t kNone = -1;

// rows <= cols: every row gets a column, one row at a time, each by a shortest path (in reduced
// costs, cost - u[row] - v[col], never negative) from it to an unmatched column, then the path's
// matches flipped.
class AugmentingPaths {
 public:
  AugmentingPaths(const double* cost, std::int64_t rows, std::int64_t cols)
      : cost_(cost), rows_(rows), cols_(cols), u_(rows, 0.0), v_(cols, 0.0), distance_(cols), previous_row_(cols, kNone),
        column_of_(rows, kNone), row_of_(cols, kNone), row_reached_(rows), column_reached_(cols), unscanned_(cols) {}

  std::vector<std::int64_t> solve() {
    for (std::int64_t row = 0; row < rows_; ++row) add_row(row);
    return column_of_;
  }

 private:
  void add_row(std::int64_t start) {
    double length = 0;
    const std::int64_t sink = shortest_path(start, length);
    // dual update: the reached rows and columns keep their reduced costs non-negative
    u_[start] += length;
    for (std::int64_t row = 0; row < rows_; ++row) {
      if (row_reached_[row] && row != start) u_[row] += length - distance_[column_of_[row]];
    }
    for (std::int64_t col = 0; col < cols_; ++col) {
      if (column_reached_[col]) v_[col] -= length - distance_[col];
    }
    // flip the path's matches back from the sink to `start`
    for (std::int64_t col = sink;;) {
      const std::int64_t row = previous_row_[col];
      row_of_[col] = row;
      std::swap(column_of_[row], col);
      if (row == start) break;
    }
  }

  // Dijkstra over columns from `start`: returns the first unmatched column reached and its distance.
  std::int64_t shortest_path(std::int64_t start, double& length) {
    std::int64_t left = cols_;
    for (std::int64_t k = 0; k < cols_; ++k) unscanned_[k] = cols_ - 1 - k;
    std::fill(row_reached_.begin(), row_reached_.end(), false);
    std::fill(column_reached_.begin(), column_reached_.end(), false);
    std::fill(distance_.begin(), distance_.end(), kInfinity);
    double reached = 0;  // the distance of the last column reached
    for (std::int64_t row = start;;) {
      row_reached_[row] = true;
      std::int64_t nearest = kNone;
      double lowest = kInfinity;
      for (std::int64_t k = 0; k < left; ++k) {
        const std::int64_t col = unscanned_[k];
        // in SciPy's order of additions: equal costs must round, and so tie, as they do there
        const double through_row = reached + cost_[row * cols_ + col] - u_[row] - v_[col];
        if (through_row < distance_[col]) {
          distance_[col] = through_row;
          previous_row_[col] = row;
        }
        if (distance_[col] < lowest || (distance_[col] == lowest && row_of_[col] == kNone)) {
          lowest = distance_[col];
          nearest = k;
        }
      }
      if (lowest == kInfinity) {
        throw RuntimeError("linear assignment: the cost matrix is infeasible (its +inf entries leave some row without "
                           "any column)");
      }
      reached = lowest;
      const std::int64_t col = unscanned_[nearest];
      column_reached_[col] = true;
      unscanned_[nearest] = unscanned_[--left];
      if (row_of_[col] == kNone) {
        length = reached;
        return col;
      }
      row = row_of_[col];
    }
  }

  const double* cost_;
  std::int64_t rows_, cols_;
  std::vector<double> u_, v_, distance_;
  std::vector<std::int64_t> previous_row_, column_of_, row_of_;
  std::vector<bool> row_reached_, column_reached_;
  std::vector<std::int64_t> unscanned_;
};

}  // namespace

Assignment linear_sum_assignment(const double* cost, std::int64_t rows, std::int64_t cols) {
  Assignment out;
  if (rows <= 0 || cols <= 0) return out;
  for (std::int64_t k = 0; k < rows * cols; ++k) {
    if (std::isnan(cost[k]) || cost[k] == -kInfinity) {
      throw RuntimeError(fmt::format("linear assignment: the {}x{} cost matrix holds {} at row {}, column {}", rows, cols,
                                     cost[k], k / cols, k % cols));
    }
  }
  if (rows <= cols) {
    const std::vector<std::int64_t> column_of = AugmentingPaths(cost, rows, cols).solve();
    out.rows.resize(static_cast<std::size_t>(rows));
    std::iota(out.rows.begin(), out.rows.end(), 0);
    out.cols = column_of;
    return out;
  }
  std::vector<double> transposed(static_cast<std::size_t>(rows * cols));
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c) transposed[static_cast<std::size_t>(c * rows + r)] = cost[r * cols + c];
  }
  const std::vector<std::int64_t> row_of_column = AugmentingPaths(transposed.data(), cols, rows).solve();
  std::vector<std::int64_t> order(row_of_column.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) { return row_of_column[a] < row_of_column[b]; });
  for (const std::int64_t col : order) {
    out.rows.push_back(row_of_column[static_cast<std::size_t>(col)]);
    out.cols.push_back(col);
  }
  return out;
}

Assignment linear_sum_assignment(const at::Tensor& cost) {
  if (cost.dim() != 2) throw RuntimeError(fmt::format("linear assignment: a cost matrix has 2 dimensions, not {}", cost.dim()));
  const at::Tensor values = cost.to(at::kCPU, at::kDouble).contiguous();
  return linear_sum_assignment(values.const_data_ptr<double>(), values.size(0), values.size(1));
}

}  // namespace libreyolo::models::detr
