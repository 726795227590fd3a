// Classification data: data= resolved to an ImageFolder spec, torchvision's RandomResizedCrop box,
// the evaluation view's sizes, the collate, the training samples' determinism, and `data crops`.
#include "core/error.h"
#include "data/box_crops.h"
#include "data/classify_dataset.h"
#include "data/image_folder.h"
#include "data/resample.h"
#include "data/resample_kernel.h"
#include "nn/cpu_kernels.h"
#include "data/synth.h"
#include "test_images.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <tuple>
#include <string>
#include <vector>

#include "catch.h"  // last: see catch.h

using namespace libreyolo;
using namespace test_images;
namespace fs = std::filesystem;

namespace {

// root/<split>/<class>/<i>.jpg
fs::path image_folder(const std::string& tag, const std::vector<std::string>& splits, const std::vector<std::string>& classes, int per_class) {
  const fs::path root = fresh_folder(tag);
  for (const auto& split : splits) {
    for (const auto& cls : classes) {
      for (int i = 0; i < per_class; ++i) write_bytes(root / split / cls / (std::to_string(i) + ".jpg"), jpeg_bytes(gradient(40 + 7 * i, 30)));
    }
  }
  return root;
}

}  // namespace

TEST_CASE("data= of a classifier: an ImageFolder root, one of its split folders, or a YAML naming it", "[classify_data]") {
  const fs::path root = image_folder("cls_spec", {"train", "val"}, {"cat", "dog"}, 2);
  const data::DatasetSpec spec = data::image_folder_spec(root.string());
  CHECK(spec.root == root);
  CHECK(spec.names == std::vector<std::string>{"cat", "dog"});
  CHECK(spec.split("train") == std::vector<fs::path>{root / "train"});
  CHECK(spec.split("val") == std::vector<fs::path>{root / "val"});
  CHECK(spec.split("test").empty());
  CHECK(data::image_folder_spec((root / "val").string()).root == root);
  write_text(root / "data.yaml", "path: .\ntrain: train\nval: val\nnames: [cat, dog]\n");
  CHECK(data::image_folder_spec((root / "data.yaml").string()).names == spec.names);
  write_text(root / "wrong.yaml", "path: .\nnames: [dog, cat]\n");
  CHECK_THROWS_AS(data::image_folder_spec((root / "wrong.yaml").string()), DataError);
  write_text(root / "nested.yaml", "train: images/train\n");
  CHECK_THROWS_AS(data::image_folder_spec((root / "nested.yaml").string()), DataError);
  CHECK_THROWS_AS(data::image_folder_spec((root / "missing").string()), DataError);
}

TEST_CASE("RandomResizedCrop's box lies in the image, covers scale..1 of its area at 3/4..4/3, else the centre crop",
          "[classify_data]") {
  for (std::uint64_t index = 0; index < 300; ++index) {
    data::SampleRandom random(7, 0, index);
    const cv::Rect box = data::random_resized_crop_box(200, 150, 0.5, 1.0, random);
    INFO(box);
    REQUIRE(box.x >= 0);
    REQUIRE(box.y >= 0);
    REQUIRE(box.x + box.width <= 200);
    REQUIRE(box.y + box.height <= 150);
    const double area = static_cast<double>(box.area()) / (200.0 * 150.0);
    CHECK(area >= 0.5 * 0.97);  // w and h are rounded
    const double ratio = static_cast<double>(box.width) / box.height;
    CHECK(ratio >= 0.75 * 0.97);
    CHECK(ratio <= 4.0 / 3.0 * 1.03);
  }
  // a strip no crop of ratio 3/4..4/3 with half its area fits: the centre crop at the nearest ratio
  data::SampleRandom random(1, 0, 0);
  CHECK(data::random_resized_crop_box(1000, 10, 0.5, 1.0, random) == cv::Rect(493, 0, 13, 10));
  CHECK(data::random_resized_crop_box(10, 1000, 0.5, 1.0, random) == cv::Rect(0, 493, 10, 13));
}

TEST_CASE("The evaluation view: shorter side to floor(imgsz / crop_pct), the centre square", "[classify_data]") {
  const cv::Mat image = gradient(300, 200);
  data::CropPlacement placement;
  const cv::Mat view = data::eval_view(image, 224, 0.875, &placement);
  CHECK(view.size() == cv::Size(224, 224));
  // 200 -> 256, 300 -> int(256 * 300 / 200) = 384; offsets round((384 - 224) / 2) = 80 and 16
  CHECK(placement.left == 80);
  CHECK(placement.top == 16);
  CHECK(placement.gain_x == 384.0 / 300.0);
  CHECK_THROWS_AS(data::eval_view(image, 224, 0.0), UsageError);
  // Pillow's resize of an image to its own size is the image
  CHECK(cv::norm(data::pillow_resize(image, image.size(), data::ResampleFilter::bicubic), image, cv::NORM_INF) == 0);
}

TEST_CASE("Training samples: imgsz squares from (seed, epoch, index) only; the collate's labels and RGB planes",
          "[classify_data]") {
  const fs::path root = image_folder("cls_samples", {"train"}, {"a", "b", "c"}, 3);
  const auto classes = data::image_folder_classes(root);
  const data::ClassifyDataset dataset(data::scan_image_folder(root, "train", classes), 32);
  CHECK(dataset.size() == 9);
  CHECK(dataset.image_classes(4) == std::vector<int>{1});
  data::ClassifyAugment augment;
  augment.image_size = 32;
  const data::ClassifyPipeline pipeline(dataset, augment, 3);
  const auto first = pipeline.sample(5, 2), again = pipeline.sample(5, 2), other = pipeline.sample(5, 3);
  CHECK(first.image.size() == cv::Size(32, 32));
  CHECK(first.label == 1);
  CHECK(cv::norm(first.image, again.image, cv::NORM_INF) == 0);
  CHECK(cv::norm(first.image, other.image, cv::NORM_INF) > 0);  // another epoch, another crop
  cv::Mat blue(32, 32, CV_8UC3, cv::Scalar(255, 0, 0));  // BGR
  const data::Batch batch = data::collate_classify({{blue, 2}, {first.image, 0}}, {7, 1}, false);
  CHECK(batch.targets.equal(at::tensor({2, 0}, at::kLong)));
  CHECK(batch.images.sizes() == at::IntArrayRef({2, 3, 32, 32}));
  CHECK(batch.images[0][2].eq(255).all().item<bool>());  // blue is the third RGB plane
  CHECK(batch.images[0][0].eq(0).all().item<bool>());
  CHECK(batch.indices == std::vector<std::size_t>{7, 1});
}

TEST_CASE("data crops: every class in both splits, an image's crops in one split, an existing folder refused", "[classify_data]") {
  const fs::path dir = fresh_folder("cls_crops");
  const auto synth = data::write_synthetic_dataset({.out = dir / "synth", .train_images = 16, .val_images = 4, .image_size = 128, .seed = 2});
  const data::DatasetSpec spec = data::load_dataset_spec(synth.yaml.string());
  const auto result = data::write_box_crops(spec, {.out = dir / "cls", .margin = 0.1, .min_size = 8, .val_fraction = 0.3, .workers = 2});
  CHECK(result.images == 20);
  CHECK(result.train > 0);
  CHECK(result.val > 0);
  const auto classes = data::image_folder_classes(dir / "cls");
  CHECK(classes.size() == result.classes.size());
  const auto train = data::scan_image_folder(dir / "cls", "train", classes);
  const auto val = data::scan_image_folder(dir / "cls", "val", classes);
  CHECK(train.images.size() == result.train);
  CHECK(val.images.size() == result.val);
  // an image's crops are in one split: the one its path under the root hashes to
  const auto source_of = [](const fs::path& crop) {
    std::string name = crop.stem().string();
    name.resize(name.rfind('_'));
    // "images_train_000001" is "images/train/000001"
    const std::size_t first = name.find('_'), second = name.find('_', first + 1);
    return name.substr(0, first) + "/" + name.substr(first + 1, second - first - 1) + "/" + name.substr(second + 1);
  };
  for (const auto& image : val.images) CHECK(data::crop_goes_to_val(source_of(image.path), 0.3));
  for (const auto& image : train.images) CHECK_FALSE(data::crop_goes_to_val(source_of(image.path), 0.3));
  CHECK_THROWS_AS(data::write_box_crops(spec, {.out = dir / "cls"}), DataError);
  CHECK(data::crop_goes_to_val("images/train/000001", 0.3) == data::crop_goes_to_val("images/train/000001", 0.3));
}

namespace {

// An axis of `out_size` outputs over `in_size` inputs: each output reads 1..ksize inputs from a
// nondecreasing start with random fixed-point weights (negative lobes included, summing to 2^22 as
// Pillow's do), as data/resample.cpp builds them.
struct TestAxis {
  int ksize = 0;
  std::vector<int> first, count;
  std::vector<std::int32_t> weights;
  data::kernels::ResampleAxis view() const {
    return {.out_size = static_cast<int>(first.size()), .ksize = ksize, .first = first.data(), .count = count.data(),
            .weights = weights.data()};
  }
};

TestAxis random_axis(int in_size, int out_size, int ksize, std::mt19937& random) {
  TestAxis axis;
  axis.ksize = ksize;
  for (int i = 0; i < out_size; ++i) {
    const int start = std::min(in_size - 1, static_cast<int>(static_cast<double>(i) * in_size / out_size));
    const int n = 1 + static_cast<int>(random() % static_cast<unsigned>(std::min(ksize, in_size - start)));
    axis.first.push_back(start);
    axis.count.push_back(n);
    std::int32_t left = 1 << data::kernels::kResamplePrecisionBits;
    for (int x = 0; x < ksize; ++x) {
      std::int32_t w = 0;
      if (x + 1 == n) w = left;
      else if (x < n) w = static_cast<std::int32_t>(random() % (1u << 21)) - (1 << 19);
      left -= w;
      axis.weights.push_back(w);
    }
  }
  return axis;
}

std::uint8_t clip(std::int64_t sum) { return static_cast<std::uint8_t>(std::clamp<std::int64_t>(sum >> data::kernels::kResamplePrecisionBits, 0, 255)); }

}  // namespace

TEST_CASE("Resampling passes: every CPU capability's copy gives the pixels of the scalar definition", "[classify_data]") {
  std::vector<std::pair<const char*, data::kernels::ResampleKernels>> kernels{{"DEFAULT", data::kernels::DEFAULT::resample_kernels()}};
#if defined(__x86_64__)
  for (const nn::CpuKernels k : nn::runnable_vectorised_cpu_kernels()) {
    kernels.emplace_back(nn::cpu_kernels_name(k), k == nn::CpuKernels::Avx2 ? data::kernels::AVX2::resample_kernels()
                                                                            : data::kernels::AVX512::resample_kernels());
  }
#endif
  std::mt19937 random(7);
  const std::int64_t half = std::int64_t{1} << (data::kernels::kResamplePrecisionBits - 1);
  for (const int channels : {1, 2, 3, 4}) {
    for (const auto& [rows, cols, out] : std::vector<std::tuple<int, int, int>>{{1, 1, 1}, {7, 13, 5}, {8, 64, 64}, {17, 100, 37}, {33, 41, 90}}) {
      cv::Mat source(rows, cols, CV_8UC(channels));
      cv::randu(source, 0, 256);
      const TestAxis ax = random_axis(cols, out, 9, random);
      const TestAxis ay = random_axis(rows, out, 7, random);
      // the definitions, in 64-bit sums
      cv::Mat wide(rows, out, CV_8UC(channels)), tall(out, cols, CV_8UC(channels));
      for (int y = 0; y < rows; ++y) {
        for (int i = 0; i < out; ++i) {
          for (int c = 0; c < channels; ++c) {
            std::int64_t sum = half;
            for (int x = 0; x < ax.count[i]; ++x) sum += std::int64_t{source.ptr<std::uint8_t>(y)[(ax.first[i] + x) * channels + c]} * ax.weights[i * ax.ksize + x];
            wide.ptr<std::uint8_t>(y)[i * channels + c] = clip(sum);
          }
        }
      }
      for (int i = 0; i < out; ++i) {
        for (int b = 0; b < cols * channels; ++b) {
          std::int64_t sum = half;
          for (int y = 0; y < ay.count[i]; ++y) sum += std::int64_t{source.ptr<std::uint8_t>(ay.first[i] + y)[b]} * ay.weights[i * ay.ksize + y];
          tall.ptr<std::uint8_t>(i)[b] = clip(sum);
        }
      }
      for (const auto& [name, k] : kernels) {
        const std::string where = fmt::format("{}: channels {}, {}x{} to {}", name, channels, rows, cols, out);
        INFO(where);
        cv::Mat got_wide(rows, out, CV_8UC(channels), cv::Scalar::all(1)), got_tall(out, cols, CV_8UC(channels), cv::Scalar::all(1));
        k.horizontal(source.ptr<std::uint8_t>(0), source.step, rows, channels, got_wide.ptr<std::uint8_t>(0), got_wide.step, ax.view());
        CHECK(cv::norm(got_wide, wide, cv::NORM_INF) == 0);
        // the vertical pass from a view starting at row 2, as the horizontal-first order hands it over
        const int shift = std::min(2, ay.first.front());
        k.vertical(source.ptr<std::uint8_t>(shift), source.step, cols * channels, got_tall.ptr<std::uint8_t>(0), got_tall.step, ay.view(), shift);
        CHECK(cv::norm(got_tall, tall, cv::NORM_INF) == 0);
      }
    }
  }
}
