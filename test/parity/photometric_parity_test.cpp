// Parity of our photometric distortion (data/augment/ssd.h) with torchvision's
// RandomPhotometricDistort, which libreyolo 1.6.0's D-FINE and DEIM pipeline runs first
// (make_photometric_reference.py): the same draws applied to the same uint8 image give the same
// pixels to two steps of 255 in under 3% of the values (the bound's reasons at the check below).
// Brightness, contrast, saturation and the permutation are uint8 blends computed as torchvision's
// vectorised kernels do them; the hue goes through float HSV by another route (OpenCV's).
//   photometric_parity_test DIR
#include "data/augment/ssd.h"
#include "module_parity.h"

#include <opencv2/core.hpp>

using libreyolo::data::PhotometricDraw;
using parity::Tensors;

namespace {

// CHW RGB uint8 <-> HWC BGR cv::Mat
cv::Mat to_bgr(const at::Tensor& chw) {
  const at::Tensor hwc = chw.flip(0).permute({1, 2, 0}).contiguous();
  return cv::Mat(static_cast<int>(hwc.size(0)), static_cast<int>(hwc.size(1)), CV_8UC3, hwc.data_ptr()).clone();
}

at::Tensor to_rgb(const cv::Mat& bgr) {
  return at::from_blob(bgr.data, {bgr.rows, bgr.cols, 3}, at::kByte).clone().permute({2, 0, 1}).flip(0).contiguous();
}

bool run_case(const Tensors& io, const std::string& name) {
  const at::Tensor config = io.at(name + ".config");
  const auto value = [&](int i) { return config[i].item<double>(); };
  PhotometricDraw draw;
  const auto factor = [&](int i) { return value(i) == -99.0 ? std::nullopt : std::optional<double>(value(i)); };
  draw.brightness = factor(0), draw.contrast = factor(1), draw.saturation = factor(2), draw.hue = factor(3);
  draw.contrast_first = value(4) != 0;
  if (value(5) >= 0) {
    // torchvision permutes RGB channels; ours are BGR: RGB channel c is our 2 - c
    std::array<int, 3> permutation{};
    for (int c = 0; c < 3; ++c) permutation[2 - c] = 2 - static_cast<int>(value(5 + c));
    draw.permutation = permutation;
  }
  const cv::Mat input = to_bgr(io.at("image"));
  const cv::Mat before = input.clone();
  const at::Tensor ours = to_rgb(libreyolo::data::apply_photometric(input, draw));
  const at::Tensor reference = io.at(name + ".output");
  const bool untouched = cv::norm(input, before, cv::NORM_INF) == 0;
  const auto worst = (ours.to(at::kInt) - reference.to(at::kInt)).abs().max().item<int>();
  const double share = (ours != reference).to(at::kDouble).mean().item<double>();
  // Each op may differ by one step where a truncation boundary falls between two roundings: ours
  // fuses the blend's add, as ATen's vectorised kernels do, while ATen's scalar path (the ISA level
  // "default") rounds twice; and the hue takes another HSV route. Chained ops (saturation, then hue,
  // then contrast) can carry a step into the next: at most two steps, in under 3% of the values (at
  // "default", 1.1% of case 9's; bit-identical on AVX-512 but for the hue's 0.02-0.05%).
  const bool ok = untouched && ours.sizes() == reference.sizes() && worst <= 2 && share < 0.03;
  fmt::print("{}: brightness {} contrast {} ({}) saturation {} hue {} permutation {}: worst {} ({:.2f}% of values differ), "
             "input untouched {}: {}\n",
             name, value(0), value(1), draw.contrast_first ? "first" : "last", value(2), value(3), value(5) >= 0 ? "yes" : "no",
             worst, 100 * share, untouched, ok ? "ok" : "MISMATCH");
  return ok;
}

}  // namespace

int main(int argc, char** argv) { return parity::run_cases(argc, argv, "photometric.safetensors", "config", "photometric", run_case); }
