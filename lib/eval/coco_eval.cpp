#include "eval/coco_eval.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <optional>

namespace libreyolo::eval {

namespace {

constexpr int kThresholds = 10, kRecalls = 101, kAreas = 4;
constexpr std::array<std::array<double, 2>, kAreas> kAreaRange{
    {{0, 1e10}, {0, 32.0 * 32.0}, {32.0 * 32.0, 96.0 * 96.0}, {96.0 * 96.0, 1e10}}};

// As numpy.linspace computes them (i·step + start, the last one exactly the end), so that a
// recall landing exactly on a threshold compares the same way as in pycocotools.
double threshold(int t) { return t == kThresholds - 1 ? 0.95 : t * ((0.95 - 0.5) / 9) + 0.5; }
double recall_point(int r) { return r == kRecalls - 1 ? 1.0 : r * (1.0 / 100) + 0.0; }

// A crowd region is measured against the detection's own area (pycocotools' maskUtils.iou).
double iou(const CocoBox& d, const CocoBox& g) {
  const double w = std::min(d.x + d.w, g.x + g.w) - std::max(d.x, g.x);
  const double h = std::min(d.y + d.h, g.y + g.h) - std::max(d.y, g.y);
  if (w <= 0 || h <= 0) return 0;
  const double inter = w * h;
  return inter / (g.crowd ? d.w * d.h : d.w * d.h + g.w * g.h - inter);
}

// One image, one category, one area range (up to the largest maxDets): what accumulate needs.
struct ImageEval {
  std::vector<double> scores;                  // detections by descending score, ≤ the largest maxDets
  std::vector<std::array<char, kThresholds>> matched, ignored;  // per detection
  int counted_gt = 0;                          // ground truths not ignored
};

ImageEval evaluate_image(const std::vector<const CocoBox*>& gts_in, std::vector<const CocoBox*> dts, int area,
                         std::size_t max_detections) {
  ImageEval e;
  const double lo = kAreaRange[area][0], hi = kAreaRange[area][1];
  // ground truth: not-ignored first (stable)
  std::vector<const CocoBox*> gts;
  std::vector<char> gt_ignore;
  for (int pass = 0; pass < 2; ++pass) {
    for (const CocoBox* g : gts_in) {
      const double a = g->range_area();
      const char ignore = (g->crowd || a < lo || a > hi) ? 1 : 0;
      if (ignore == pass) {
        gts.push_back(g);
        gt_ignore.push_back(ignore);
      }
    }
  }
  std::stable_sort(dts.begin(), dts.end(), [](const CocoBox* a, const CocoBox* b) { return a->score > b->score; });
  if (dts.size() > max_detections) dts.resize(max_detections);
  e.counted_gt = static_cast<int>(std::count(gt_ignore.begin(), gt_ignore.end(), 0));
  std::vector<std::array<char, kThresholds>> gt_matched(gts.size(), std::array<char, kThresholds>{});
  e.matched.assign(dts.size(), {});
  e.ignored.assign(dts.size(), {});
  for (int t = 0; t < kThresholds; ++t) {
    for (std::size_t d = 0; d < dts.size(); ++d) {
      double best = std::min(threshold(t), 1 - 1e-10);
      int m = -1;
      for (std::size_t g = 0; g < gts.size(); ++g) {
        if (gt_matched[g][t] && !gts[g]->crowd) continue;  // a crowd region takes any number
        if (m > -1 && gt_ignore[static_cast<std::size_t>(m)] == 0 && gt_ignore[g] == 1) break;
        const double o = iou(*dts[d], *gts[g]);
        if (o < best) continue;
        best = o;
        m = static_cast<int>(g);
      }
      if (m == -1) continue;
      e.ignored[d][t] = gt_ignore[static_cast<std::size_t>(m)];
      e.matched[d][t] = 1;
      gt_matched[static_cast<std::size_t>(m)][t] = 1;
    }
  }
  for (std::size_t d = 0; d < dts.size(); ++d) {
    const double a = dts[d]->w * dts[d]->h;
    const bool outside = a < lo || a > hi;
    for (int t = 0; t < kThresholds; ++t) {
      if (!e.matched[d][t] && outside) e.ignored[d][t] = 1;
    }
    e.scores.push_back(dts[d]->score);
  }
  return e;
}

double mean_valid(const std::vector<double>& values) {
  double sum = 0;
  int count = 0;
  for (const double v : values) {
    if (v > -1) {
      sum += v;
      ++count;
    }
  }
  return count ? sum / count : -1;
}

}  // namespace

CocoResult coco_evaluate(const std::vector<std::int64_t>& images, const std::vector<int>& categories,
                         const std::vector<CocoBox>& ground_truth, const std::vector<CocoBox>& detections,
                         int max_detections) {
  // LibreYOLO's eval_max_det: maxDets {1, 10, 100} plus the cap; AP and the area ARs are read at
  // the cap, metrics/recall stays AR@100.
  std::vector<int> max_dets{1, 10, 100, std::max(1, max_detections)};
  std::sort(max_dets.begin(), max_dets.end());
  max_dets.erase(std::unique(max_dets.begin(), max_dets.end()), max_dets.end());
  const int kMaxDets = static_cast<int>(max_dets.size());
  const auto index_of = [&](int cap) { return static_cast<int>(std::find(max_dets.begin(), max_dets.end(), cap) - max_dets.begin()); };
  const int at_cap = index_of(std::max(1, max_detections)), at_100 = index_of(100);
  std::map<std::pair<std::int64_t, int>, std::vector<const CocoBox*>> gts, dts;
  for (const auto& g : ground_truth) gts[{g.image, g.category}].push_back(&g);
  for (const auto& d : detections) dts[{d.image, d.category}].push_back(&d);
  const std::size_t K = categories.size();
  // precision[t][r][k][a][m], recall[t][k][a][m]; -1 = not measurable
  std::vector<double> precision(kThresholds * kRecalls * K * kAreas * kMaxDets, -1.0);
  std::vector<double> recall(kThresholds * K * kAreas * kMaxDets, -1.0);
  const auto p_at = [&](int t, int r, std::size_t k, int a, int m) -> double& {
    return precision[(((static_cast<std::size_t>(t) * kRecalls + r) * K + k) * kAreas + a) * kMaxDets + m];
  };
  const auto r_at = [&](int t, std::size_t k, int a, int m) -> double& {
    return recall[((static_cast<std::size_t>(t) * K + k) * kAreas + a) * kMaxDets + m];
  };
  static const std::vector<const CocoBox*> none;
  for (std::size_t k = 0; k < K; ++k) {
    for (int a = 0; a < kAreas; ++a) {
      std::vector<ImageEval> evals;
      for (const auto image : images) {
        const auto g = gts.find({image, categories[k]});
        const auto d = dts.find({image, categories[k]});
        if (g == gts.end() && d == dts.end()) continue;
        evals.push_back(evaluate_image(g == gts.end() ? none : g->second, d == dts.end() ? none : d->second, a,
                                       static_cast<std::size_t>(max_dets.back())));
      }
      int counted = 0;
      for (const auto& e : evals) counted += e.counted_gt;
      if (counted == 0) continue;
      for (int m = 0; m < kMaxDets; ++m) {
        struct Det { double score; const ImageEval* e; std::size_t i; };
        std::vector<Det> all;
        for (const auto& e : evals) {
          const std::size_t n = std::min<std::size_t>(e.scores.size(), static_cast<std::size_t>(max_dets[static_cast<std::size_t>(m)]));
          for (std::size_t i = 0; i < n; ++i) all.push_back({e.scores[i], &e, i});
        }
        std::stable_sort(all.begin(), all.end(), [](const Det& x, const Det& y) { return x.score > y.score; });
        for (int t = 0; t < kThresholds; ++t) {
          std::vector<double> rc, pr;
          double tp = 0, fp = 0;
          for (const Det& det : all) {
            if (det.e->ignored[det.i][t]) {
              // neither tp nor fp, but the cumulative sums still record this position
            } else if (det.e->matched[det.i][t]) {
              tp += 1;
            } else {
              fp += 1;
            }
            rc.push_back(tp / counted);
            pr.push_back(tp / (fp + tp + std::numeric_limits<double>::epsilon()));
          }
          r_at(t, k, a, m) = rc.empty() ? 0.0 : rc.back();
          for (std::size_t i = pr.size(); i-- > 1;) pr[i - 1] = std::max(pr[i - 1], pr[i]);
          for (int r = 0; r < kRecalls; ++r) {
            const auto it = std::lower_bound(rc.begin(), rc.end(), recall_point(r));
            const std::size_t pi = static_cast<std::size_t>(it - rc.begin());
            p_at(t, r, k, a, m) = pi < pr.size() ? pr[pi] : 0.0;
          }
        }
      }
    }
  }
  CocoResult result;
  const auto ap = [&](int t_only, int a, int m, std::optional<std::size_t> k_only = std::nullopt) {
    std::vector<double> values;
    for (int t = 0; t < kThresholds; ++t) {
      if (t_only >= 0 && t != t_only) continue;
      for (int r = 0; r < kRecalls; ++r) {
        for (std::size_t k = 0; k < K; ++k) {
          if (!k_only || *k_only == k) values.push_back(p_at(t, r, k, a, m));
        }
      }
    }
    return mean_valid(values);
  };
  const auto ar = [&](int a, int m, std::optional<std::size_t> k_only = std::nullopt) {
    std::vector<double> values;
    for (int t = 0; t < kThresholds; ++t) {
      for (std::size_t k = 0; k < K; ++k) {
        if (!k_only || *k_only == k) values.push_back(r_at(t, k, a, m));
      }
    }
    return mean_valid(values);
  };
  const int c = at_cap;
  result.stats = {ap(-1, 0, c), ap(0, 0, c), ap(5, 0, c), ap(-1, 1, c), ap(-1, 2, c), ap(-1, 3, c),
                  ar(0, index_of(1)), ar(0, index_of(10)), ar(0, c),    ar(1, c),     ar(2, c),     ar(3, c)};
  result.precision = result.stats[0];
  result.recall = ar(0, at_100);
  for (std::size_t k = 0; k < K; ++k) {
    CocoResult::PerClass row;
    row.category = categories[k];
    std::map<std::int64_t, int> per_image;
    for (const auto& g : ground_truth) {
      if (g.category == categories[k] && !g.crowd) ++per_image[g.image];
    }
    if (per_image.empty()) continue;
    row.images = static_cast<std::int64_t>(per_image.size());
    for (const auto& [image, n] : per_image) row.instances += n;
    row.map50_95 = ap(-1, 0, c, k);
    row.map50 = ap(0, 0, c, k);
    row.precision = row.map50_95;
    row.recall = ar(0, at_100, k);
    result.per_class.push_back(row);
  }
  return result;
}

}  // namespace libreyolo::eval
