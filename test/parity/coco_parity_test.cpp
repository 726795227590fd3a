// Our COCO metrics against pycocotools on fixture detections (make_coco_reference.py): the 12
// summary stats, LibreYOLO's precision/recall and per-class mAP50 / mAP50-95 / recall, to 1e-4.
//   coco_parity_test DIR
#include "eval/coco_eval.h"

#include "fixture_boxes.h"

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>

using namespace libreyolo::eval;

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const auto cases = parity::read_cases(argv[1], "coco.json");
  bool ok = true;
  int index = 0;
  for (const auto& c : cases) {
    const auto [gt, dt] = parity::boxes_of(c);
    const auto result = coco_evaluate(c["images"].get<std::vector<std::int64_t>>(), c["categories"].get<std::vector<int>>(), gt, dt);
    const auto& expected = c["expected"];
    double worst = 0;
    for (int i = 0; i < 12; ++i) worst = std::max(worst, std::abs(result.stats[i] - expected["stats"][i].get<double>()));
    worst = std::max(worst, std::abs(result.precision - expected["precision"].get<double>()));
    worst = std::max(worst, std::abs(result.recall - expected["recall"].get<double>()));
    std::size_t row = 0;
    for (const auto& e : expected["per_class"]) {
      if (e["map50_95"].get<double>() < 0) continue;  // no ground truth for this class
      if (row >= result.per_class.size() || result.per_class[row].category != e["category"].get<int>()) {
        worst = 1;
        break;
      }
      const auto& ours = result.per_class[row++];
      worst = std::max({worst, std::abs(ours.map50_95 - e["map50_95"].get<double>()),
                        std::abs(ours.map50 - e["map50"].get<double>()), std::abs(ours.recall - e["recall"].get<double>())});
    }
    // eval_max_det: the same detections under a COCO cap below and above the 10 of AR10
    for (const auto& capped : c["capped"]) {
      const int cap = capped["cap"].get<int>();
      const auto limited = coco_evaluate(c["images"].get<std::vector<std::int64_t>>(), c["categories"].get<std::vector<int>>(), gt, dt, cap);
      for (int i = 0; i < 12; ++i) worst = std::max(worst, std::abs(limited.stats[i] - capped["stats"][i].get<double>()));
      worst = std::max(worst, std::abs(limited.recall - capped["recall"].get<double>()));
      fmt::print("  eval_max_det={}: mAP50-95 {:.4f} (pycocotools {:.4f})\n", cap, limited.stats[0], capped["stats"][0].get<double>());
    }
    const bool same = worst < 1e-4 && row == result.per_class.size();
    fmt::print("fixture {}: {} gt, {} detections: mAP50-95 {:.4f} (pycocotools {:.4f}), mAP50 {:.4f}, AR100 {:.4f}; max |diff| {:.2g} {}\n",
               index++, gt.size(), dt.size(), result.stats[0], expected["stats"][0].get<double>(), result.stats[1],
               result.stats[8], worst, same ? "ok" : "MISMATCH");
    ok = ok && same;
  }
  return ok ? 0 : 1;
}
