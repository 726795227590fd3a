// COCO detection metrics with pycocotools' exact semantics (COCOeval, iouType "bbox"): IoU
// thresholds 0.50:0.05:0.95, 101 recall points with the interpolated (monotone) precision read
// as a step function, maxDets 1/10/100, area ranges all/small/medium/large. Ground truth may be
// crowd regions (ignored; a detection inside one is neither right nor wrong) and carry the area
// its annotation gives (COCO JSON's segment area); else its area is its box's (YOLO labels).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace libreyolo::eval {

struct CocoBox {
  std::int64_t image = 0;
  int category = 0;
  double x = 0, y = 0, w = 0, h = 0;  // top-left corner and size, original pixels
  double score = 1;                   // detections only
  bool crowd = false;                 // ground truth only: an iscrowd region
  double area = -1;                   // ground truth only: the annotation's area; -1: w * h

  double box_area() const { return w * h; }
  double range_area() const { return area >= 0 ? area : box_area(); }  // what the area ranges sort by
};

struct CocoResult {
  // pycocotools' stats[0..11]: AP, AP50, AP75, AP small/medium/large, AR1, AR10, AR100,
  // AR small/medium/large (-1 where nothing could be measured).
  std::array<double, 12> stats{};
  double map50_95() const { return stats[0]; }
  double map50() const { return stats[1]; }
  double map75() const { return stats[2]; }
  // LibreYOLO 1.6's deprecated metrics/precision and metrics/recall aliases, kept for the parity
  // test only: mAP50-95 and AR@100 ("not real P" in its own code). The real P and R: pr_metrics.h.
  double precision = -1, recall = -1;
  struct PerClass {
    int category = 0;
    std::int64_t images = 0, instances = 0;
    double precision = -1, recall = -1, map50 = -1, map50_95 = -1;
  };
  std::vector<PerClass> per_class;  // categories with ground truth, ascending
};

// `images`: every evaluated image id (images without ground truth count: their detections are
// false positives). `categories`: the class ids to average over. `max_detections`: the COCO cap
// (LibreYOLO's eval_max_det): AP, AR@cap and the area metrics count at most that many
// detections per image (maxDets becomes {1, 10, 100, cap}; 100 is pycocotools' default).
CocoResult coco_evaluate(const std::vector<std::int64_t>& images, const std::vector<int>& categories,
                         const std::vector<CocoBox>& ground_truth, const std::vector<CocoBox>& detections,
                         int max_detections = 100);

}  // namespace libreyolo::eval
