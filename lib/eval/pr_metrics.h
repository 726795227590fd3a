// Precision and recall as Ultralytics defines them (ultralytics/utils/metrics.py): each
// detection is matched to ground truth per image at IoU 0.50:0.05:0.95 (match_predictions),
// then ap_per_class samples each class's precision and recall on 1000 confidences, picks the
// confidence that maximises the (smoothed) mean F1, and reports P, R and F1 there. These are the
// P and R of the validation table and results.csv; COCO's mAP stays pycocotools' (coco_eval.h).
#pragma once

#include "eval/coco_eval.h"

#include <array>
#include <vector>

namespace libreyolo::eval {

inline constexpr int kIouThresholds = 10;  // 0.50, 0.55, ... 0.95
using Correct = std::array<bool, kIouThresholds>;

// IoU of two boxes as Ultralytics' box_iou computes it (with its 1e-7 in the denominator).
double box_iou(const CocoBox& a, const CocoBox& b);

// One image, predictions in descending confidence: `iou[g][p]` between ground truth g and
// prediction p. Each prediction in turn takes, per threshold, the unclaimed ground truth of its
// class with the highest IoU, and is correct when that IoU reaches the threshold (Ultralytics 8.4).
std::vector<Correct> match_predictions(const std::vector<int>& pred_classes, const std::vector<int>& true_classes,
                                       const std::vector<std::vector<double>>& iou);

struct PrMetrics {
  std::vector<int> classes;                           // classes with ground truth, ascending
  std::vector<double> precision, recall, f1;          // per class, at the operating confidence
  std::vector<std::array<double, kIouThresholds>> ap;  // per class (101-point interpolated)
  double mean_precision = 0, mean_recall = 0;         // the table's "all" row
  double confidence = 0;                              // the operating point: argmax of the smoothed mean F1
  std::vector<double> x;                              // 1000 confidences (or recalls for pr_curve), 0..1
  std::vector<std::vector<double>> p_curve, r_curve, f1_curve;  // per class over confidence
  std::vector<std::vector<double>> pr_curve;                     // per class: precision over recall (IoU 0.5)
};

// `correct`, `confidence` and `pred_classes` per detection (any order); `target_classes` per ground truth.
PrMetrics ap_per_class(const std::vector<Correct>& correct, const std::vector<double>& confidence,
                       const std::vector<int>& pred_classes, const std::vector<int>& target_classes);

// Both steps on COCO boxes (original pixels), images matched by id.
PrMetrics detection_pr_metrics(const std::vector<CocoBox>& ground_truth, const std::vector<CocoBox>& detections);

}  // namespace libreyolo::eval
