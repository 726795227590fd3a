#include "eval/plots.h"

#include "core/atomic_file.h"
#include "data/image_io.h"
#include "data/preview.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

namespace libreyolo::eval {

namespace {

std::string escape(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else out += c;
  }
  return out;
}

std::string class_name(const std::vector<std::string>& names, int c) {
  return c >= 0 && c < static_cast<int>(names.size()) ? names[static_cast<std::size_t>(c)] : std::to_string(c);
}

// One chart: every class in grey-blue, the mean in bold, both axes 0..1.
std::string curve_chart(const std::string& title, const std::string& x_label, const std::string& y_label,
                        const std::vector<double>& x, const std::vector<std::vector<double>>& curves,
                        const std::vector<std::string>& labels, const std::string& mean_label) {
  const int width = 640, height = 480, left = 60, right = 180, top = 40, bottom = 50;
  const double plot_w = width - left - right, plot_h = height - top - bottom;
  const auto px = [&](double v) { return left + v * plot_w; };
  const auto py = [&](double v) { return top + (1 - std::clamp(v, 0.0, 1.0)) * plot_h; };
  const auto polyline = [&](const std::vector<double>& y, const char* colour, double stroke) {
    std::string points;
    for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) points += fmt::format("{:.1f},{:.1f} ", px(x[i]), py(y[i]));
    return fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"{}\" points=\"{}\"/>\n", colour, stroke, points);
  };
  std::string svg = fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" "
                                "font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
                                "<text x=\"{}\" y=\"24\" font-size=\"15\">{}</text>\n",
                                width, height, left, escape(title));
  for (int tick = 0; tick <= 10; tick += 2) {
    const double v = tick / 10.0;
    svg += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#eee\"/>"
                       "<text x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\">{4:.1f}</text>\n",
                       px(v), top, top + plot_h, top + plot_h + 16, v);
    svg += fmt::format("<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#eee\"/>"
                       "<text x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\">{5:.1f}</text>\n",
                       left, py(v), left + plot_w, left - 6, py(v) + 4, v);
  }
  svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#444\"/>\n", left, top, plot_w, plot_h);
  svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", left + plot_w / 2, height - 10, escape(x_label));
  svg += fmt::format("<text transform=\"translate(16,{}) rotate(-90)\" text-anchor=\"middle\">{}</text>\n", top + plot_h / 2,
                     escape(y_label));
  std::vector<double> mean(x.size(), 0.0);
  for (std::size_t c = 0; c < curves.size(); ++c) {
    svg += polyline(curves[c], "#8fb3d9", 1);
    for (std::size_t i = 0; i < mean.size() && i < curves[c].size(); ++i) mean[i] += curves[c][i] / static_cast<double>(curves.size());
  }
  if (!curves.empty()) svg += polyline(mean, "#1f4e9c", 3);
  int row = 0;
  const auto legend = [&](const std::string& text, const char* colour) {
    svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"{3}\" stroke-width=\"3\"/>"
                       "<text x=\"{4}\" y=\"{5}\">{6}</text>\n",
                       left + plot_w + 12, top + 10 + 16 * row, left + plot_w + 30, colour, left + plot_w + 36, top + 14 + 16 * row,
                       escape(text));
    ++row;
  };
  legend(mean_label, "#1f4e9c");
  for (std::size_t c = 0; c < labels.size() && row < 24; ++c) legend(labels[c], "#8fb3d9");
  return svg + "</svg>\n";
}

std::string matrix_chart(const std::vector<std::vector<std::int64_t>>& matrix, const std::vector<std::string>& names) {
  const int n = static_cast<int>(matrix.size()), cell = std::max(14, std::min(48, 640 / std::max(1, n)));
  const int left = 120, top = 60, width = left + n * cell + 20, height = top + n * cell + 110;
  std::vector<std::int64_t> column_sums(static_cast<std::size_t>(n), 0);
  for (const auto& row : matrix) for (int j = 0; j < n; ++j) column_sums[static_cast<std::size_t>(j)] += row[static_cast<std::size_t>(j)];
  std::string svg = fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" "
                                "font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
                                "<text x=\"{}\" y=\"24\" font-size=\"15\">Confusion matrix (columns true, rows predicted; "
                                "shade: share of the column)</text>\n",
                                width, height, left);
  const auto label = [&](int i) { return i == n - 1 ? std::string("background") : class_name(names, i); };
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      const std::int64_t count = matrix[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)];
      const double share = column_sums[static_cast<std::size_t>(j)] ? static_cast<double>(count) / static_cast<double>(column_sums[static_cast<std::size_t>(j)]) : 0.0;
      const int shade = 255 - static_cast<int>(std::lround(200 * share));
      svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"rgb({},{},255)\" stroke=\"#ddd\"/>", left + j * cell,
                         top + i * cell, cell, cell, shade, shade);
      if (count && cell >= 20) {
        svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>", left + j * cell + cell / 2, top + i * cell + cell / 2 + 4, count);
      }
      svg += "\n";
    }
    svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", left - 6, top + i * cell + cell / 2 + 4, escape(label(i)));
    svg += fmt::format("<text transform=\"translate({},{}) rotate(60)\">{}</text>\n", left + i * cell + cell / 2, top + n * cell + 8,
                       escape(label(i)));
  }
  return svg + "</svg>\n";
}

bool write_jpeg(const std::filesystem::path& path, const cv::Mat& image) {
  const std::vector<std::uint8_t> bytes = data::encode_image(image, ".jpg", 90);
  if (bytes.empty()) return false;
  write_file_atomically(path, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  return true;
}

}  // namespace

std::vector<std::vector<std::int64_t>> confusion_matrix(const std::vector<CocoBox>& ground_truth,
                                                        const std::vector<CocoBox>& detections, int class_count,
                                                        double confidence, double iou_threshold) {
  const std::size_t n = static_cast<std::size_t>(class_count) + 1;
  std::vector<std::vector<std::int64_t>> matrix(n, std::vector<std::int64_t>(n, 0));
  std::map<std::int64_t, std::pair<std::vector<const CocoBox*>, std::vector<const CocoBox*>>> by_image;
  for (const auto& g : ground_truth) by_image[g.image].first.push_back(&g);
  for (const auto& d : detections) {
    if (d.score > confidence) by_image[d.image].second.push_back(&d);
  }
  const auto bucket = [&](int c) { return c >= 0 && c < class_count ? static_cast<std::size_t>(c) : n - 1; };
  for (const auto& [image, boxes] : by_image) {
    const auto& [gts, dts] = boxes;
    // pairs above the IoU threshold, best first; each detection, then each ground truth, once
    struct Match { std::size_t gt, dt; double iou; };
    std::vector<Match> pairs;
    for (std::size_t g = 0; g < gts.size(); ++g) {
      for (std::size_t d = 0; d < dts.size(); ++d) {
        const double v = box_iou(*gts[g], *dts[d]);
        if (v > iou_threshold) pairs.push_back({g, d, v});
      }
    }
    std::stable_sort(pairs.begin(), pairs.end(), [](const Match& a, const Match& b) { return a.iou > b.iou; });
    std::vector<char> gt_used(gts.size(), 0), dt_used(dts.size(), 0);
    std::vector<long> gt_match(gts.size(), -1);
    for (const Match& m : pairs) {
      if (gt_used[m.gt] || dt_used[m.dt]) continue;
      gt_used[m.gt] = dt_used[m.dt] = 1;
      gt_match[m.gt] = static_cast<long>(m.dt);
    }
    for (std::size_t g = 0; g < gts.size(); ++g) {
      const std::size_t true_class = bucket(gts[g]->category);
      if (gt_match[g] >= 0) ++matrix[bucket(dts[static_cast<std::size_t>(gt_match[g])]->category)][true_class];
      else ++matrix[n - 1][true_class];  // missed: background predicted
    }
    for (std::size_t d = 0; d < dts.size(); ++d) {
      if (!dt_used[d]) ++matrix[bucket(dts[d]->category)][n - 1];  // nothing there
    }
  }
  return matrix;
}

int write_validation_plots(const std::filesystem::path& dir, const Validation& v, const std::vector<std::string>& names,
                           const data::DetectionDataset& dataset, int samples) {
  std::filesystem::create_directories(dir);
  std::vector<std::string> labels;
  for (std::size_t k = 0; k < v.pr.classes.size(); ++k) {
    labels.push_back(fmt::format("{} {:.3f}", class_name(names, v.pr.classes[k]), v.pr.ap[k][0]));
  }
  double map50 = 0;
  for (const auto& ap : v.pr.ap) map50 += ap[0] / static_cast<double>(std::max<std::size_t>(1, v.pr.ap.size()));
  int written = 0;
  const auto write = [&](const char* file, const std::string& svg) {
    write_file_atomically(dir / file, svg);
    ++written;
  };
  std::vector<std::string> plain;
  for (const int c : v.pr.classes) plain.push_back(class_name(names, c));
  write("PR_curve.svg", curve_chart("Precision-recall (IoU 0.5)", "Recall", "Precision", v.pr.x, v.pr.pr_curve, labels,
                                    fmt::format("all classes {:.3f} mAP@0.5", map50)));
  write("F1_curve.svg", curve_chart("F1-confidence", "Confidence", "F1", v.pr.x, v.pr.f1_curve, plain,
                                    fmt::format("all classes, best at {:.3f}", v.pr.confidence)));
  write("P_curve.svg", curve_chart("Precision-confidence", "Confidence", "Precision", v.pr.x, v.pr.p_curve, plain, "all classes"));
  write("R_curve.svg", curve_chart("Recall-confidence", "Confidence", "Recall", v.pr.x, v.pr.r_curve, plain, "all classes"));
  std::vector<CocoBox> ground_truth;
  for (std::size_t i = 0; i < dataset.size(); ++i) {
    const auto& record = dataset.record(i);
    for (const auto& box : record.boxes) {
      const double w = box.w * record.width, h = box.h * record.height;
      ground_truth.push_back({static_cast<std::int64_t>(i), box.cls, box.cx * record.width - w / 2, box.cy * record.height - h / 2, w, h, 1});
    }
  }
  write("confusion_matrix.svg", matrix_chart(confusion_matrix(ground_truth, v.detections, dataset.class_count()), names));
  // samples: the first images, with their labels and with the predictions of score ≥ 0.25
  std::vector<cv::Mat> with_labels, with_predictions;
  for (std::size_t i = 0; i < dataset.size() && static_cast<int>(i) < samples; ++i) {
    data::Sample sample = dataset.load_resized(i);
    with_labels.push_back(data::draw_sample(sample, names));
    const double scale = static_cast<double>(sample.image.cols) / std::max(1, dataset.record(i).width);
    sample.boxes.clear();
    for (const auto& d : v.detections) {
      if (d.image != static_cast<std::int64_t>(i) || d.score < 0.25) continue;
      sample.boxes.push_back({d.category, static_cast<float>(d.x * scale), static_cast<float>(d.y * scale),
                              static_cast<float>((d.x + d.w) * scale), static_cast<float>((d.y + d.h) * scale)});
    }
    with_predictions.push_back(data::draw_sample(sample, names));
  }
  if (!with_labels.empty()) {
    written += write_jpeg(dir / "val_batch_labels.jpg", data::tile_grid(with_labels, 320));
    written += write_jpeg(dir / "val_batch_pred.jpg", data::tile_grid(with_predictions, 320));
  }
  return written;
}

}  // namespace libreyolo::eval
