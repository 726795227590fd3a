// Classification data: data= resolved to an ImageFolder spec, torchvision's RandomResizedCrop box,
// the evaluation view's sizes, the collate, the training samples' determinism, and `data crops`.
#include "core/error.h"
#include "data/box_crops.h"
#include "data/classify_dataset.h"
#include "data/image_folder.h"
#include "data/resample.h"
#include "data/synth.h"
#include "test_images.h"

#include <ATen/ATen.h>

#include <filesystem>
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
    name = name.substr(0, name.rfind('_'));
    return name.replace(name.find('_', name.find('_') + 1), 1, "/").replace(name.find('_'), 1, "/");
  };
  for (const auto& image : val.images) CHECK(data::crop_goes_to_val(source_of(image.path), 0.3));
  for (const auto& image : train.images) CHECK_FALSE(data::crop_goes_to_val(source_of(image.path), 0.3));
  CHECK_THROWS_AS(data::write_box_crops(spec, {.out = dir / "cls"}), DataError);
  CHECK(data::crop_goes_to_val("images/train/000001", 0.3) == data::crop_goes_to_val("images/train/000001", 0.3));
}
