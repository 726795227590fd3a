// Parity of our DETR detections with libreyolo 1.6.0's RT-DETR postprocess
// (make_detections_reference.py): per image the same boxes bit for bit, scores and classes, in the
// same order, for several confidences and caps.
//   detections_parity_test DIR
#include "models/detr_common/postprocess.h"
#include "models/safetensors.h"
#include "module_parity.h"

#include <ATen/ATen.h>
#include <fmt/core.h>

using namespace libreyolo::models;
using parity::Tensors;

namespace {

bool run_case(const Tensors& io, const std::string& name) {
  const at::Tensor settings = io.at(name + ".settings"), sizes_tensor = io.at(name + ".sizes");
  std::vector<std::pair<double, double>> sizes;
  for (int64_t i = 0; i < sizes_tensor.size(0); ++i) sizes.emplace_back(sizes_tensor[i][0].item<double>(), sizes_tensor[i][1].item<double>());
  const double confidence = settings[0].item<double>();
  const int cap = static_cast<int>(settings[1].item<double>());
  const auto detections = detr::top_detections(io.at(name + ".logits"), io.at(name + ".boxes"), sizes, confidence, cap);
  bool ok = true;
  for (std::size_t i = 0; i < detections.size(); ++i) {
    const at::Tensor& d = detections[i];
    const std::string image = fmt::format("{}.image{}.", name, i);
    const bool same = d.size(0) == io.at(image + "scores").size(0) && at::equal(d.narrow(1, 0, 4), io.at(image + "boxes")) &&
                      at::equal(d.select(1, 4), io.at(image + "scores")) &&
                      at::equal(d.select(1, 5).to(at::kLong), io.at(image + "classes"));
    fmt::print("{} image {}: confidence {}, cap {}: {} detections ({} in the reference): {}\n", name, i, confidence, cap, d.size(0),
               io.at(image + "scores").size(0), same ? "identical" : "DIFFER");
    ok = ok && same;
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  return parity::run_cases(argc, argv, "detections.safetensors", "settings", "detections", run_case);
}
