#include "eval/validator.h"

#include "core/parallel.h"
#include "core/printable.h"
#include "data/val_batches.h"
#include "eval/nms.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <iterator>
#include <numeric>

namespace libreyolo::eval {

std::vector<at::Tensor> detect(const std::vector<at::Tensor>& maps, const models::Family& family, const at::Tensor& input,
                               double confidence, double iou, int max_detections, bool multi_label,
                               const at::Tensor& extents) {
  if (auto own = family.detections(maps, input.size(3), input.size(2), confidence, max_detections)) {
    for (auto& d : *own) d = d.cpu();
    return std::move(*own);
  }
  std::vector<at::Tensor> float_maps;
  for (const auto& m : maps) float_maps.push_back(m.to(at::kFloat));
  const models::Decoded decoded = family.decode(float_maps);
  NmsOptions options;
  options.confidence = confidence;
  options.iou = iou;
  options.max_detections = max_detections;
  options.multi_label = multi_label;
  options.extents = extents;
  return non_max_suppression(decoded.boxes.cpu(), decoded.class_scores.cpu(), options);
}

DetectionValidator::DetectionValidator(const data::DetectionDataset& dataset, ValidatorOptions options)
    : dataset_(dataset), options_(std::move(options)) {
  std::vector<data::ImageRecord> records;
  for (std::size_t i = 0; i < dataset_.size(); ++i) records.push_back(dataset_.record(i));
  plan_ = data::plan_validation_batches(records, options_.batch_size, options_.image_size, options_.family->input_fit());
  for (std::size_t i = 0; i < dataset_.size(); ++i) {
    const auto& record = dataset_.record(i);
    const auto image = static_cast<std::int64_t>(i);
    image_ids_.push_back(image);
    if (record.source_id >= 0) {  // COCO JSON: its annotations as written, crowds included
      for (const auto& a : record.annotations) {
        ground_truth_.push_back({image, a.cls, a.x, a.y, a.w, a.h, 1.0, a.crowd, a.area});
      }
      continue;
    }
    for (const auto& box : record.boxes) {
      const double w = box.w * record.width, h = box.h * record.height;
      double x1 = box.cx * record.width - w / 2, y1 = box.cy * record.height - h / 2, x2 = x1 + w, y2 = y1 + h;
      // clipped to the image, as libreyolo 1.6.0's label parser clips every family's boxes (measured
      // with pycocotools on labels crossing the border: YOLOX mAP50-95 0.2957 clipped as LibreYOLO,
      // 0.2577 unclipped; RT-DETR-r18 0.3425 as LibreYOLO, 0.4234 unclipped)
      x1 = std::clamp(x1, 0.0, static_cast<double>(record.width));
      x2 = std::clamp(x2, 0.0, static_cast<double>(record.width));
      y1 = std::clamp(y1, 0.0, static_cast<double>(record.height));
      y2 = std::clamp(y2, 0.0, static_cast<double>(record.height));
      const double width = x2 - x1, height = y2 - y1;
      // a box without area (the label file may hold one: it is not corrupt) no detection can
      // match; LibreYOLO's validation drops it (Ultralytics' would count it as missed)
      if (!(width > 0 && height > 0)) continue;
      ground_truth_.push_back({image, box.cls, x1, y1, width, height, 1.0});
    }
  }
  // Ultralytics' P and R and the instance counts know no crowd regions
  std::copy_if(ground_truth_.begin(), ground_truth_.end(), std::back_inserter(counted_ground_truth_),
               [](const CocoBox& g) { return !g.crowd; });
}

namespace {

// The letterboxed boxes of a batch as the loss takes them: [image, class, cx, cy, w, h], normalised.
at::Tensor batch_targets(const std::vector<data::ValSample>& samples, int width, int height) {
  std::vector<float> rows;
  for (std::size_t i = 0; i < samples.size(); ++i) {
    for (const auto& box : samples[i].sample.boxes) {
      rows.insert(rows.end(), {static_cast<float>(i), static_cast<float>(box.cls), (box.x1 + box.x2) / 2 / width,
                               (box.y1 + box.y2) / 2 / height, box.width() / width, box.height() / height});
    }
  }
  return at::tensor(rows).reshape({-1, 6});
}

// Detections with the plan batch they came from, as rows [batch, image, class, x, y, w, h, score].
at::Tensor detection_rows(const std::vector<CocoBox>& detections, const std::vector<std::int64_t>& batch_of) {
  at::Tensor rows = at::empty({static_cast<std::int64_t>(detections.size()), 8}, at::kDouble);
  double* r = rows.data_ptr<double>();
  for (std::size_t i = 0; i < detections.size(); ++i) {
    const CocoBox& d = detections[i];
    for (const double v : {static_cast<double>(batch_of[i]), static_cast<double>(d.image), static_cast<double>(d.category), d.x,
                           d.y, d.w, d.h, d.score}) {
      *r++ = v;
    }
  }
  return rows;
}

// The gathered rows back as detections in plan order (the order one process produces them).
std::vector<CocoBox> detections_in_plan_order(const at::Tensor& gathered) {
  const at::Tensor rows = gathered.contiguous();
  const auto a = rows.accessor<double, 2>();
  std::vector<std::int64_t> order(static_cast<std::size_t>(rows.size(0)));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::int64_t x, std::int64_t y) { return a[x][0] < a[y][0]; });
  std::vector<CocoBox> detections;
  detections.reserve(order.size());
  for (const std::int64_t i : order) {
    detections.push_back({static_cast<std::int64_t>(a[i][1]), static_cast<int>(a[i][2]), a[i][3], a[i][4], a[i][5], a[i][6], a[i][7]});
  }
  return detections;
}

}  // namespace

Validation DetectionValidator::run(const std::function<std::vector<at::Tensor>(const at::Tensor&)>& forward,
                                   const ValidationLoss* loss) const {
  const auto start = std::chrono::steady_clock::now();
  const auto& plan = plan_;
  Validation out;
  std::vector<double> loss_sums(loss ? loss->names.size() + 1 : 0, 0.0);
  at::NoGradGuard no_grad;
  const auto shards = static_cast<std::size_t>(std::max(1, distributed_.shards));
  std::vector<std::int64_t> batch_of;  // each detection's plan batch, to restore the order after gathering
  for (std::size_t b = static_cast<std::size_t>(distributed_.shard); b < plan.batches.size(); b += shards) {
    const auto& indices = plan.batches[b];
    const cv::Size shape = plan.shapes[b];
    std::vector<data::ValSample> samples(indices.size());
    // letterbox (or stretch) in parallel: decoding is the expensive part
    const data::InputFit fit = options_.family->input_fit();
    parallel_for(indices.size(), options_.workers,
                 [&](std::size_t i) { samples[i] = data::fit_for_validation(dataset_, indices[i], shape, fit); });
    at::Tensor batch = at::empty({static_cast<std::int64_t>(indices.size()), shape.height, shape.width, 3}, at::kByte);
    for (std::size_t i = 0; i < samples.size(); ++i) {
      const cv::Mat& image = samples[i].sample.image;  // BGR, continuous
      std::memcpy(batch[static_cast<std::int64_t>(i)].data_ptr(), image.data, image.total() * image.elemSize());
    }
    batch = batch.permute({0, 3, 1, 2}).flip(1).contiguous();  // RGB CHW as the loader gives
    const at::Tensor input = options_.family->network_input(batch, options_.device);
    std::vector<at::Tensor> maps;
    if (loss) {
      const auto raw = loss->forward_raw(input);
      const auto targets = models::pad_targets(batch_targets(samples, shape.width, shape.height),
                                               static_cast<std::int64_t>(samples.size()), shape.width, shape.height)
                               .to(options_.device);
      const models::LossTerms terms = loss->loss(raw, targets);
      loss_sums[0] += terms.total.item<double>();
      for (std::size_t k = 0; k < loss->names.size(); ++k) loss_sums[k + 1] += terms.part(loss->names[k]).item<double>();
      maps = options_.family->eval_maps(raw);
    } else {
      maps = forward(input);
    }
    // Ultralytics' NMS; for the families validated top-left, LibreYOLO's: boxes clipped to the
    // image and those without area dropped before NMS (and, for YOLOX and YOLOv7, each box's best
    // class only)
    const bool top_left = fit == data::InputFit::letterbox_top_left;
    at::Tensor extents;
    if (top_left) {
      extents = at::empty({static_cast<std::int64_t>(samples.size()), 2}, at::kDouble);
      for (std::size_t i = 0; i < samples.size(); ++i) {
        extents[static_cast<std::int64_t>(i)][0] = samples[i].original.width * samples[i].gain;
        extents[static_cast<std::int64_t>(i)][1] = samples[i].original.height * samples[i].gain_y;
      }
    }
    const auto detections =
        detect(maps, *options_.family, input, options_.confidence, options_.iou, options_.max_detections,
               !options_.family->single_label_validation(), extents);
    for (std::size_t i = 0; i < samples.size(); ++i) {
      const at::Tensor d = detections[i].contiguous();
      const auto a = d.accessor<float, 2>();
      for (std::int64_t k = 0; k < d.size(0); ++k) {
        const data::PixelBox box = data::to_original_pixels(
            {static_cast<int>(a[k][5]), a[k][0], a[k][1], a[k][2], a[k][3]}, samples[i]);
        out.detections.push_back({static_cast<std::int64_t>(indices[i]), box.cls, box.x1, box.y1, box.x2 - box.x1,
                                  box.y2 - box.y1, a[k][4]});
        batch_of.push_back(static_cast<std::int64_t>(b));
      }
    }
  }
  if (shards > 1) {
    out.detections = detections_in_plan_order(distributed_.gather_rows(detection_rows(out.detections, batch_of)));
    if (loss) {
      at::Tensor sums = at::tensor(loss_sums, at::kDouble);
      distributed_.sum(sums);
      std::copy(sums.data_ptr<double>(), sums.data_ptr<double>() + sums.numel(), loss_sums.begin());
    }
  }
  std::vector<int> categories(static_cast<std::size_t>(dataset_.class_count()));
  std::iota(categories.begin(), categories.end(), 0);
  out.coco = coco_evaluate(image_ids_, categories, ground_truth_, out.detections, options_.coco_max_detections);
  out.pr = detection_pr_metrics(counted_ground_truth_, out.detections);
  if (loss && !plan.batches.empty()) {
    const double batches = static_cast<double>(plan.batches.size());
    out.losses.emplace_back("loss", loss_sums[0] / batches);
    for (std::size_t k = 0; k < loss->names.size(); ++k) out.losses.emplace_back(loss->names[k], loss_sums[k + 1] / batches);
  }
  out.images = static_cast<std::int64_t>(dataset_.size());
  out.instances = static_cast<std::int64_t>(counted_ground_truth_.size());
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

std::string format_table(const Validation& v, const std::vector<std::string>& names) {
  std::string text = fmt::format("{:>22}{:>11}{:>11}{:>11}{:>11}{:>11}{:>11}\n", "Class", "Images", "Instances", "P", "R",
                                 "mAP50", "mAP50-95");
  const auto value = [](double x) { return x < 0 ? 0.0 : x; };
  text += fmt::format("{:>22}{:>11}{:>11}{:>11.3f}{:>11.3f}{:>11.3f}{:>11.3f}\n", "all", v.images, v.instances,
                      v.pr.mean_precision, v.pr.mean_recall, value(v.coco.map50()), value(v.coco.map50_95()));
  for (const auto& row : v.coco.per_class) {
    const auto it = std::find(v.pr.classes.begin(), v.pr.classes.end(), row.category);
    const std::size_t k = static_cast<std::size_t>(it - v.pr.classes.begin());
    const double precision = it == v.pr.classes.end() ? 0.0 : v.pr.precision[k];
    const double recall = it == v.pr.classes.end() ? 0.0 : v.pr.recall[k];
    const std::string name = row.category < static_cast<int>(names.size()) ? printable(names[static_cast<std::size_t>(row.category)])
                                                                             : std::to_string(row.category);
    text += fmt::format("{:>22}{:>11}{:>11}{:>11.3f}{:>11.3f}{:>11.3f}{:>11.3f}\n", name, row.images, row.instances,
                        precision, recall, value(row.map50), value(row.map50_95));
  }
  return text;
}

}  // namespace libreyolo::eval
