// Our precision/recall (pr_metrics.h) against Ultralytics on fixture detections
// (make_pr_reference.py): the per-image matches at the ten IoU thresholds, then per class P, R,
// F1 at the best mean-F1 confidence and AP at each threshold, and the table's mean P and R.
//   pr_parity_test DIR
#include "eval/pr_metrics.h"

#include "fixture_boxes.h"

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>

using namespace libreyolo::eval;

namespace {

double worst_of(const std::vector<double>& ours, const nlohmann::json& expected) {
  if (ours.size() != expected.size()) return 1;
  double worst = 0;
  for (std::size_t i = 0; i < ours.size(); ++i) worst = std::max(worst, std::abs(ours[i] - expected[i].get<double>()));
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const auto cases = parity::read_cases(argv[1], "pr.json");
  bool ok = true;
  int index = 0;
  for (const auto& c : cases) {
    const auto [gt, dt] = parity::boxes_of(c);
    const auto& expected = c["expected"];
    // the matches, image by image
    int match_mismatches = 0;
    for (const auto& m : expected["matches"]) {
      const std::int64_t image = m["image"].get<std::int64_t>();
      std::vector<CocoBox> g, d;
      for (const auto& b : gt) if (b.image == image) g.push_back(b);
      for (const auto& b : dt) if (b.image == image) d.push_back(b);
      std::stable_sort(d.begin(), d.end(), [](const CocoBox& a, const CocoBox& b) { return a.score > b.score; });
      std::vector<int> pred_cls, true_cls;
      for (const auto& b : d) pred_cls.push_back(b.category);
      for (const auto& b : g) true_cls.push_back(b.category);
      std::vector<std::vector<double>> ious(g.size(), std::vector<double>(d.size()));
      for (std::size_t i = 0; i < g.size(); ++i) for (std::size_t j = 0; j < d.size(); ++j) ious[i][j] = box_iou(g[i], d[j]);
      const auto correct = match_predictions(pred_cls, true_cls, ious);
      for (std::size_t j = 0; j < correct.size(); ++j) {
        for (int t = 0; t < kIouThresholds; ++t) match_mismatches += correct[j][static_cast<std::size_t>(t)] != (m["correct"][j][t].get<int>() != 0);
      }
    }
    const PrMetrics ours = detection_pr_metrics(gt, dt);
    double worst = std::max({worst_of(ours.precision, expected["p"]), worst_of(ours.recall, expected["r"]),
                             worst_of(ours.f1, expected["f1"]), std::abs(ours.mean_precision - expected["mp"].get<double>()),
                             std::abs(ours.mean_recall - expected["mr"].get<double>())});
    if (ours.classes != expected["classes"].get<std::vector<int>>()) worst = 1;
    for (std::size_t k = 0; k < ours.ap.size() && k < expected["ap"].size(); ++k) {
      worst = std::max(worst, worst_of(std::vector<double>(ours.ap[k].begin(), ours.ap[k].end()), expected["ap"][k]));
    }
    const bool same = worst < 1e-6 && match_mismatches == 0;
    fmt::print("fixture {}: {} gt, {} detections: P {:.4f} (ultralytics {:.4f}), R {:.4f} ({:.4f}); match differences {}, "
               "max |diff| {:.2g} {}\n", index++, gt.size(), dt.size(), ours.mean_precision, expected["mp"].get<double>(),
               ours.mean_recall, expected["mr"].get<double>(), match_mismatches, worst, same ? "ok" : "MISMATCH");
    ok = ok && same;
  }
  return ok ? 0 : 1;
}
