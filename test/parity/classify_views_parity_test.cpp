// Parity of classification's evaluation view with libreyolo 1.6.0's (make_classify_views_reference.py):
// the image decoded as stored (no EXIF rotation), its shorter side resized to floor(imgsz /
// crop_pct) with Pillow's bicubic filter, the centre crop and the ImageNet normalisation give the
// very tensor torchvision's transforms give, for every image and view; and data::pillow_resize
// equals Pillow's resize, boxes with fractions included; the classifiers' loss and its gradient
// equal its classification_loss's.
//   classify_views_parity_test DIR
#include "data/classify_dataset.h"
#include "data/image_io.h"
#include "data/loader.h"
#include "data/resample.h"
#include "models/checkpoint.h"
#include "models/family.h"
#include "models/safetensors.h"

#include <ATen/ATen.h>
#include <fmt/core.h>

#include <fstream>
#include <string>
#include <vector>

using namespace libreyolo;

namespace {

// Largest absolute difference and whether the two are equal to the bit.
struct Difference {
  double worst = 0;
  bool exact = true;
};

Difference compare(const at::Tensor& ours, const at::Tensor& reference) {
  if (ours.sizes() != reference.sizes()) return {1e30, false};
  const at::Tensor a = ours.to(at::kDouble), b = reference.to(at::kDouble);
  return {(a - b).abs().max().item<double>(), at::equal(ours.contiguous(), reference.contiguous().to(ours.scalar_type()))};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    fmt::print(stderr, "usage: {} DIR\n", argv[0]);
    return 2;
  }
  try {
    const std::string dir = argv[1];
    const auto io = models::read_safetensors(dir + "/views.safetensors");
    std::vector<std::string> images;
    std::ifstream listing(dir + "/images.txt");
    for (std::string line; std::getline(listing, line);) {
      if (!line.empty()) images.push_back(line);
    }
    const models::Family& family = models::family("mobilenetv4");
    bool ok = !images.empty();
    int views = 0, exact = 0;
    for (int v = 0; io.count(fmt::format("view{}.config", v)); ++v) {
      const at::Tensor config = io.at(fmt::format("view{}.config", v));
      const int imgsz = static_cast<int>(config[0].item<double>());
      const double crop_pct = config[1].item<double>();
      for (std::size_t i = 0; i < images.size(); ++i) {
        const cv::Mat view = data::eval_view(data::decode_image(images[i], 0, /*upright=*/false), imgsz, crop_pct);
        const at::Tensor batch = data::stack_images(1, [&](int) -> const cv::Mat& { return view; }, false);
        const at::Tensor input = family.network_input(batch, at::kCPU)[0];
        const Difference d = compare(input, io.at(fmt::format("view{}.image{}", v, i)));
        ++views;
        exact += d.exact ? 1 : 0;
        if (!d.exact) {
          fmt::print("view {} (imgsz {}, crop_pct {}) of {}: largest difference {:.3g}\n", v, imgsz, crop_pct, images[i], d.worst);
          ok = false;
        }
      }
    }
    int resizes = 0, resizes_exact = 0;
    for (int r = 0; io.count(fmt::format("resize{}.source", r)); ++r) {
      at::Tensor source = io.at(fmt::format("resize{}.source", r)).contiguous();
      const at::Tensor expected = io.at(fmt::format("resize{}.out", r));
      const at::Tensor box = io.at(fmt::format("resize{}.box", r));
      const cv::Mat image(static_cast<int>(source.size(0)), static_cast<int>(source.size(1)), CV_8UC3, source.data_ptr());
      const double x0 = box[0].item<double>(), y0 = box[1].item<double>(), x1 = box[2].item<double>(), y1 = box[3].item<double>();
      const cv::Mat out = data::pillow_resize(image, {static_cast<int>(expected.size(1)), static_cast<int>(expected.size(0))},
                                              data::ResampleFilter::bicubic, cv::Rect2d(x0, y0, x1 - x0, y1 - y0));
      const at::Tensor ours = at::from_blob(out.data, {out.rows, out.cols, 3}, at::kByte).clone();
      const Difference d = compare(ours, expected);
      ++resizes;
      resizes_exact += d.exact ? 1 : 0;
      if (!d.exact) {
        const at::Tensor wrong = (ours.to(at::kInt) - expected.to(at::kInt)).abs().amax(2).nonzero();
        fmt::print("resize {}: largest difference {:.3g} at {} pixels, first (row, column) ({}, {}), last ({}, {})\n", r, d.worst,
                   wrong.size(0), wrong[0][0].item<std::int64_t>(), wrong[0][1].item<std::int64_t>(),
                   wrong[-1][0].item<std::int64_t>(), wrong[-1][1].item<std::int64_t>());
        ok = false;
      }
    }
    int losses = 0, losses_exact = 0;
    const auto loss = family.make_loss({}, models::parse_arguments(config::command_train, std::vector<std::string>{"model=resnet-18"}));
    for (int c = 0; io.count(fmt::format("loss{}.logits", c)); ++c) {
      const at::Tensor logits = io.at(fmt::format("loss{}.logits", c)).clone().requires_grad_();
      const models::LossTerms terms = (*loss)({logits}, models::TargetBatch::of_classes(io.at(fmt::format("loss{}.targets", c))));
      terms.total.backward();
      const bool same = at::equal(terms.total, io.at(fmt::format("loss{}.loss", c))) &&
                        at::equal(logits.grad(), io.at(fmt::format("loss{}.grad", c)));
      ++losses;
      losses_exact += same ? 1 : 0;
      if (!same) {
        fmt::print("loss {}: ours {} (libreyolo {}), gradient largest difference {:.3g}\n", c, terms.total.item<double>(),
                   io.at(fmt::format("loss{}.loss", c)).item<double>(),
                   (logits.grad() - io.at(fmt::format("loss{}.grad", c))).abs().max().item<double>());
        ok = false;
      }
    }
    fmt::print("{} of {} evaluation views, {} of {} Pillow resizes, {} of {} losses with their gradients bit-identical\n", exact,
               views, resizes_exact, resizes, losses_exact, losses);
    fmt::print("classify views parity: {}\n", ok && views > 0 && resizes > 0 ? "OK" : "FAILED");
    return ok && views > 0 && resizes > 0 ? 0 : 1;
  } catch (const std::exception& error) {
    fmt::print("FAIL: {}\n", error.what());
    return 1;
  }
}
