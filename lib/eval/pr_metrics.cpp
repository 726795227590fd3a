#include "eval/pr_metrics.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

namespace libreyolo::eval {

namespace {

constexpr int kPoints = 1000;
constexpr double kEps = 1e-16;

// torch.linspace(0.5, 0.95, 10), as Ultralytics' iouv (float32)
double iou_threshold(int i) { return static_cast<double>(static_cast<float>(0.5 + 0.05 * i)); }

// numpy.linspace(0, 1, n)
std::vector<double> linspace(int n) {
  std::vector<double> x(static_cast<std::size_t>(n));
  const double step = 1.0 / (n - 1);
  for (int i = 0; i < n; ++i) x[static_cast<std::size_t>(i)] = i * step;
  x.back() = 1.0;
  return x;
}

// numpy.interp(x, xp, fp, left, right) for increasing xp.
double interp(double x, const std::vector<double>& xp, const std::vector<double>& fp, double left, double right) {
  if (xp.empty()) return left;
  if (x < xp.front()) return left;
  if (x > xp.back()) return right;
  const auto it = std::upper_bound(xp.begin(), xp.end(), x);
  if (it == xp.end()) return fp.back();
  const std::size_t j = static_cast<std::size_t>(it - xp.begin());
  if (j == 0) return fp.front();
  const double x0 = xp[j - 1], x1 = xp[j];
  if (x1 == x0) return fp[j - 1];
  return fp[j - 1] + (fp[j] - fp[j - 1]) * (x - x0) / (x1 - x0);
}

// Ultralytics' compute_ap: sentinels, precision envelope, 101-point interpolation, trapezoid rule.
double compute_ap(const std::vector<double>& recall, const std::vector<double>& precision, std::vector<double>* envelope_recall,
                  std::vector<double>* envelope_precision) {
  std::vector<double> mrec{0.0}, mpre{1.0};
  mrec.insert(mrec.end(), recall.begin(), recall.end());
  mpre.insert(mpre.end(), precision.begin(), precision.end());
  mrec.insert(mrec.end(), {recall.empty() ? 1.0 : recall.back(), 1.0});
  mpre.insert(mpre.end(), {0.0, 0.0});
  for (std::size_t i = mpre.size() - 1; i-- > 0;) mpre[i] = std::max(mpre[i], mpre[i + 1]);
  const std::vector<double> x = linspace(101);
  double ap = 0, previous = interp(x[0], mrec, mpre, mpre.front(), mpre.back());
  for (std::size_t i = 1; i < x.size(); ++i) {
    const double y = interp(x[i], mrec, mpre, mpre.front(), mpre.back());
    ap += (x[i] - x[i - 1]) * (y + previous) / 2;
    previous = y;
  }
  if (envelope_recall) *envelope_recall = std::move(mrec);
  if (envelope_precision) *envelope_precision = std::move(mpre);
  return ap;
}

// Ultralytics' smooth(y, f): box filter of odd width round(len * f * 2) // 2 + 1, edges padded.
std::vector<double> smooth(const std::vector<double>& y, double f) {
  const int nf = static_cast<int>(std::nearbyint(static_cast<double>(y.size()) * f * 2)) / 2 + 1;
  std::vector<double> padded(static_cast<std::size_t>(nf / 2), y.front());
  padded.insert(padded.end(), y.begin(), y.end());
  padded.insert(padded.end(), static_cast<std::size_t>(nf / 2), y.back());
  std::vector<double> out(y.size());
  for (std::size_t i = 0; i < y.size(); ++i) {
    double sum = 0;
    for (int k = 0; k < nf; ++k) sum += padded[i + static_cast<std::size_t>(k)];
    out[i] = sum / nf;
  }
  return out;
}

}  // namespace

double box_iou(const CocoBox& a, const CocoBox& b) {
  const double w = std::min(a.x + a.w, b.x + b.w) - std::max(a.x, b.x);
  const double h = std::min(a.y + a.h, b.y + b.h) - std::max(a.y, b.y);
  if (w <= 0 || h <= 0) return 0;
  const double inter = w * h;
  return inter / (a.w * a.h + b.w * b.h - inter + 1e-7);
}

std::vector<Correct> match_predictions(const std::vector<int>& pred_classes, const std::vector<int>& true_classes,
                                       const std::vector<std::vector<double>>& iou) {
  std::vector<Correct> correct(pred_classes.size(), Correct{});
  std::vector<std::array<bool, kIouThresholds>> claimed(true_classes.size(), std::array<bool, kIouThresholds>{});
  for (std::size_t p = 0; p < pred_classes.size(); ++p) {  // in descending confidence
    for (int t = 0; t < kIouThresholds; ++t) {
      const auto ti = static_cast<std::size_t>(t);
      double best = 0;
      std::size_t best_gt = 0;
      for (std::size_t g = 0; g < true_classes.size(); ++g) {  // the best unclaimed ground truth of its class (first on ties)
        const double v = claimed[g][ti] || true_classes[g] != pred_classes[p] ? 0.0 : iou[g][p];
        if (v > best) {
          best = v;
          best_gt = g;
        }
      }
      if (best > 0 && best >= iou_threshold(t)) {
        correct[p][ti] = true;
        claimed[best_gt][ti] = true;
      }
    }
  }
  return correct;
}

PrMetrics ap_per_class(const std::vector<Correct>& correct, const std::vector<double>& confidence,
                       const std::vector<int>& pred_classes, const std::vector<int>& target_classes) {
  PrMetrics m;
  m.x = linspace(kPoints);
  std::vector<std::size_t> order(confidence.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return confidence[a] > confidence[b]; });
  std::map<int, std::int64_t> labels;
  for (const int c : target_classes) ++labels[c];
  for (const auto& [c, n] : labels) {
    m.classes.push_back(c);
    std::vector<double> conf, tpc_sum(kIouThresholds, 0), fpc_sum(kIouThresholds, 0);
    std::vector<std::vector<double>> recall(kIouThresholds), precision(kIouThresholds);
    for (const std::size_t i : order) {
      if (pred_classes[i] != c) continue;
      conf.push_back(-confidence[i]);  // increasing, for interp
      for (int t = 0; t < kIouThresholds; ++t) {
        const bool hit = correct[i][static_cast<std::size_t>(t)];
        tpc_sum[static_cast<std::size_t>(t)] += hit;
        fpc_sum[static_cast<std::size_t>(t)] += !hit;
        recall[static_cast<std::size_t>(t)].push_back(tpc_sum[static_cast<std::size_t>(t)] / (static_cast<double>(n) + kEps));
        precision[static_cast<std::size_t>(t)].push_back(tpc_sum[static_cast<std::size_t>(t)] /
                                                         (tpc_sum[static_cast<std::size_t>(t)] + fpc_sum[static_cast<std::size_t>(t)]));
      }
    }
    std::vector<double> p_curve(kPoints, 0.0), r_curve(kPoints, 0.0), pr(kPoints, 0.0);
    std::array<double, kIouThresholds> ap{};
    if (!conf.empty()) {
      for (int k = 0; k < kPoints; ++k) {
        const double x = -m.x[static_cast<std::size_t>(k)];
        r_curve[static_cast<std::size_t>(k)] = interp(x, conf, recall[0], 0.0, recall[0].back());
        p_curve[static_cast<std::size_t>(k)] = interp(x, conf, precision[0], 1.0, precision[0].back());
      }
      for (int t = 0; t < kIouThresholds; ++t) {
        std::vector<double> mrec, mpre;
        ap[static_cast<std::size_t>(t)] = compute_ap(recall[static_cast<std::size_t>(t)], precision[static_cast<std::size_t>(t)], &mrec, &mpre);
        if (t == 0) {
          for (int k = 0; k < kPoints; ++k) pr[static_cast<std::size_t>(k)] = interp(m.x[static_cast<std::size_t>(k)], mrec, mpre, mpre.front(), mpre.back());
        }
      }
    }
    m.p_curve.push_back(std::move(p_curve));
    m.r_curve.push_back(std::move(r_curve));
    m.pr_curve.push_back(std::move(pr));
    m.ap.push_back(ap);
  }
  const std::size_t nc = m.classes.size();
  std::vector<double> mean_f1(kPoints, 0.0);
  for (std::size_t c = 0; c < nc; ++c) {
    std::vector<double> f1(kPoints);
    for (std::size_t k = 0; k < kPoints; ++k) {
      const double p = m.p_curve[c][k], r = m.r_curve[c][k];
      f1[k] = 2 * p * r / (p + r + kEps);
      mean_f1[k] += f1[k] / static_cast<double>(nc);
    }
    m.f1_curve.push_back(std::move(f1));
  }
  if (nc == 0) return m;
  const auto smoothed = smooth(mean_f1, 0.1);
  const std::size_t best = static_cast<std::size_t>(std::max_element(smoothed.begin(), smoothed.end()) - smoothed.begin());
  m.confidence = m.x[best];
  for (std::size_t c = 0; c < nc; ++c) {
    m.precision.push_back(m.p_curve[c][best]);
    m.recall.push_back(m.r_curve[c][best]);
    m.f1.push_back(m.f1_curve[c][best]);
    m.mean_precision += m.precision.back() / static_cast<double>(nc);
    m.mean_recall += m.recall.back() / static_cast<double>(nc);
  }
  return m;
}

PrMetrics detection_pr_metrics(const std::vector<CocoBox>& ground_truth, const std::vector<CocoBox>& detections) {
  std::map<std::int64_t, std::pair<std::vector<const CocoBox*>, std::vector<const CocoBox*>>> by_image;
  for (const auto& g : ground_truth) by_image[g.image].first.push_back(&g);
  for (const auto& d : detections) by_image[d.image].second.push_back(&d);
  std::vector<Correct> correct;
  std::vector<double> confidence;
  std::vector<int> pred_classes, target_classes;
  for (const auto& [image, boxes] : by_image) {
    const auto& gts = boxes.first;
    std::vector<const CocoBox*> dts = boxes.second;  // matched in descending confidence, as NMS hands them out
    std::stable_sort(dts.begin(), dts.end(), [](const CocoBox* a, const CocoBox* b) { return a->score > b->score; });
    std::vector<int> true_cls, pred_cls;
    for (const CocoBox* g : gts) true_cls.push_back(g->category);
    for (const CocoBox* d : dts) pred_cls.push_back(d->category);
    std::vector<std::vector<double>> iou(gts.size(), std::vector<double>(dts.size(), 0.0));
    for (std::size_t g = 0; g < gts.size(); ++g) {
      for (std::size_t p = 0; p < dts.size(); ++p) iou[g][p] = box_iou(*gts[g], *dts[p]);
    }
    const auto matched = match_predictions(pred_cls, true_cls, iou);
    correct.insert(correct.end(), matched.begin(), matched.end());
    for (const CocoBox* d : dts) confidence.push_back(d->score);
    pred_classes.insert(pred_classes.end(), pred_cls.begin(), pred_cls.end());
    target_classes.insert(target_classes.end(), true_cls.begin(), true_cls.end());
  }
  return ap_per_class(correct, confidence, pred_classes, target_classes);
}

}  // namespace libreyolo::eval
