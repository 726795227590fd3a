// Parity of the yolox recipe's training samples (YOLOX, YOLOv7 and RTMDet) with the augmentation
// off against libreyolo 1.6.0's (make_samples_reference.py: its dataset's load_resized_img and
// labels times r, then the TrainTransform's top-left fit): the same pixels exactly and the same
// boxes to 1e-3 px, from our training pipeline and from our top-left validation input, for a model
// of each of the three families. A decoder that scales JPEGs itself, or sides rounded up, give other
// pixels (the over-fit of RTMDet-t lost 0.05-0.14 mAP50 to that train/val difference).
//   samples_parity_test DIR
#include "core/config.h"
#include "data/training_data.h"
#include "data/val_batches.h"
#include "models/checkpoint.h"
#include "models/family.h"
#include "module_parity.h"

#include <opencv2/core.hpp>

#include <memory>
#include <vector>

using namespace libreyolo;
using parity::Tensors;

namespace {

std::string directory;  // the reference's folder: its images, labels and data.yaml

struct Built {
  std::string model;
  const models::Family* family = nullptr;
  data::TrainingData data;
};

const std::vector<std::unique_ptr<Built>>& built() {
  static const auto all = [] {
    std::vector<std::unique_ptr<Built>> out;
    for (const std::string model : {"yolox-n", "yolo7-b", "rtmdet-t"}) {
      const std::vector<std::string> arguments = {
          "model=" + model, "data=" + directory + "/data.yaml", "imgsz=320", "mosaic=0", "mixup=0", "hsv_prob=0",
          "flip_prob=0", "degrees=0", "translate=0", "shear=0", "mosaic_scale=(1,1)", "workers=0", "quiet=true"};
      const config::Config config = models::parse_arguments(config::command_train, arguments);
      auto entry = std::make_unique<Built>();
      entry->model = model;
      entry->family = &models::family_of(config);
      entry->data = data::load_training_data(config, entry->family->sample_pipeline());
      out.push_back(std::move(entry));
    }
    return out;
  }();
  return all;
}

// (worst pixel difference, worst box corner difference in px; 1e30 when the counts or classes differ)
std::pair<int, double> compare(const data::Sample& ours, const at::Tensor& image, const at::Tensor& labels) {
  const at::Tensor pixels = at::from_blob(ours.image.data, {ours.image.rows, ours.image.cols, 3}, at::kByte);
  const int pixel = pixels.sizes() == image.sizes()
                        ? (pixels.to(at::kInt) - image.to(at::kInt)).abs().max().item<int>() : 1 << 30;
  double box = labels.size(0) == static_cast<std::int64_t>(ours.boxes.size()) ? 0.0 : 1e30;
  for (std::size_t k = 0; box < 1e30 && k < ours.boxes.size(); ++k) {
    const auto row = labels[static_cast<std::int64_t>(k)];
    const double cx = row[1].item<double>(), cy = row[2].item<double>(), w = row[3].item<double>(), h = row[4].item<double>();
    const data::PixelBox& b = ours.boxes[k];
    if (b.cls != static_cast<int>(row[0].item<double>())) box = 1e30;
    for (const double d : {b.x1 - (cx - w / 2), b.y1 - (cy - h / 2), b.x2 - (cx + w / 2), b.y2 - (cy + h / 2)}) {
      box = std::max(box, std::abs(d));
    }
  }
  return {pixel, box};
}

bool run_case(const Tensors& io, const std::string& name) {
  const at::Tensor bytes = io.at(name + ".name");
  const std::string file(reinterpret_cast<const char*>(bytes.data_ptr()), static_cast<std::size_t>(bytes.numel()));
  const at::Tensor image = io.at(name + ".image");
  const at::Tensor labels = io.at(name + ".labels");
  bool ok = true;
  for (const auto& entry : built()) {
    const data::DetectionDataset& dataset = *entry->data.detection_dataset();
    std::size_t index = dataset.size();
    for (std::size_t i = 0; i < dataset.size(); ++i) {
      if (dataset.record(i).image.filename() == file) index = i;
    }
    if (index == dataset.size()) {
      fmt::print("{} {}: not in our dataset: MISMATCH\n", name, file);
      return false;
    }
    const auto [train_pixel, train_box] = compare(entry->data.detection_pipeline()->sample(index, 0), image, labels);
    const data::ValSample val = data::fit_for_validation(dataset, index, cv::Size(320, 320), entry->family->input_fit());
    const auto [val_pixel, val_box] = compare(val.sample, image, labels);
    const bool same = train_pixel == 0 && train_box < 1e-3 && val_pixel == 0 && val_box < 1e-3;
    fmt::print("{} {} ({}x{}), {}: training sample: worst pixel {}, box {:.2g} px; validation input: worst pixel {}, "
               "box {:.2g} px: {}\n",
               name, file, dataset.record(index).width, dataset.record(index).height, entry->model, train_pixel, train_box,
               val_pixel, val_box, same ? "ok" : "MISMATCH");
    ok = ok && same;
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2) directory = argv[1];
  return parity::run_cases(argc, argv, "samples.safetensors", "name", "samples", run_case);
}
