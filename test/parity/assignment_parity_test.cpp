// Our linear assignment (models/detr_common/linear_assignment.h) against SciPy's linear_sum_assignment on
// the matrices of make_assignment_reference.py: the very same pairs, ties included.
//   assignment_parity_test DIR
#include "models/detr_common/linear_assignment.h"

#include <fmt/core.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>

using libreyolo::models::detr::linear_sum_assignment;

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  std::ifstream in(std::string(argv[1]) + "/assignment.json");
  const nlohmann::json cases = nlohmann::json::parse(in);
  int failed = 0;
  for (const auto& c : cases) {
    const std::int64_t rows = c["shape"][0], cols = c["shape"][1];
    std::vector<double> cost;
    for (const auto& hex : c["cost"]) cost.push_back(std::strtod(hex.get<std::string>().c_str(), nullptr));
    const auto ours = linear_sum_assignment(cost.data(), rows, cols);
    const auto rows_expected = c["rows"].get<std::vector<std::int64_t>>();
    const auto cols_expected = c["cols"].get<std::vector<std::int64_t>>();
    const bool same = ours.rows == rows_expected && ours.cols == cols_expected;
    double total = 0;
    for (std::size_t k = 0; k < ours.rows.size(); ++k) total += cost[static_cast<std::size_t>(ours.rows[k] * cols + ours.cols[k])];
    fmt::print("{} {}: {} pairs, total {:.6g} (SciPy {:.6g})\n", same ? "ok  " : "FAIL", c["name"].get<std::string>(),
               ours.rows.size(), total, c["total"].get<double>());
    if (!same) {
      fmt::print("  ours:  rows {} cols {}\n  SciPy: rows {} cols {}\n", ours.rows, ours.cols, rows_expected, cols_expected);
      ++failed;
    }
  }
  fmt::print("{} of {} matrices assigned as SciPy does\n", cases.size() - static_cast<std::size_t>(failed), cases.size());
  return failed == 0 && !cases.empty() ? 0 : 1;
}
