// The Hungarian matcher's solver for the encoder-decoder detectors (RT-DETR, D-FINE, DEIM): a
// rectangular linear sum assignment, the one SciPy's linear_sum_assignment returns, ties included
// (the references match queries to targets with SciPy; another optimal assignment would train
// another model).
#pragma once

#include <ATen/Tensor.h>

#include <cstdint>
#include <vector>

namespace libreyolo::models::detr {

// Matched pairs (rows[k], cols[k]), min(rows, cols) of them, sorted by row.
struct Assignment {
  std::vector<std::int64_t> rows, cols;
};

// The assignment of least total cost of a rows x cols matrix (row-major). Each row is matched to at
// most one column and each column to at most one row; every row is matched when rows <= cols,
// every column otherwise. +inf forbids a pair. Throws RuntimeError on NaN or -inf entries, or when
// the forbidden pairs leave no complete assignment (SciPy's two ValueErrors).
Assignment linear_sum_assignment(const double* cost, std::int64_t rows, std::int64_t cols);
// The same for a 2-D CPU tensor of any floating type (read as double).
Assignment linear_sum_assignment(const at::Tensor& cost);

}  // namespace libreyolo::models::detr
