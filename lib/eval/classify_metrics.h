// Classification's validation metrics as libreyolo 1.6.0's ClassifyValidator computes them:
// top-1 and top-k accuracy with k = min(5, classes) (its "top5"), and precision, recall and F1 per
// class from the top-1 predictions (precision 0 for a class never predicted, F1 0 where P + R is
// 0), averaged over the classes present in the targets only.
#pragma once

#include <ATen/Tensor.h>

#include <cstdint>

namespace libreyolo::eval {

class ClassifyMetrics {
 public:
  explicit ClassifyMetrics(int classes);

  // One batch: logits [B, classes] (any float type, read as float32), targets [B] class indices.
  // DataError naming the labels outside [0, classes) (a dataset whose classes the model lacks).
  void update(const at::Tensor& logits, const at::Tensor& targets);

  std::int64_t total() const { return total_; }
  int top_k() const;           // min(5, classes)
  double top1() const;         // 0 before any update
  double top5() const;         // top-k accuracy
  struct Macro {
    double precision = 0, recall = 0, f1 = 0;
  };
  Macro macro() const;         // zeros before any update

  // Every count (total, top-1 and top-k hits, then true positives, predictions and support per
  // class) as float64 [3 + 3 x classes], and back: a data-parallel validation sums the ranks'.
  at::Tensor counts() const;
  void set_counts(const at::Tensor& counts);

 private:
  int classes_;
  std::int64_t top1_correct_ = 0, top5_correct_ = 0, total_ = 0;
  at::Tensor true_positives_, predicted_, support_;  // int64 [classes] each
};

}  // namespace libreyolo::eval
