#include "data/training_data.h"
#include "data/val_batches.h"
#include "test_images.h"

#include <opencv2/imgproc.hpp>
#include "catch.h"  // last: see catch.h

using namespace libreyolo::data;
using namespace test_images;
namespace fs = std::filesystem;

namespace {

// A 500 x 300 image under `root` with one white box, (100, 60) to (220, 150), and its label.
std::vector<ImageRecord> one_box_image(const fs::path& root) {
  cv::Mat image(300, 500, CV_8UC3, cv::Scalar(0, 0, 0));
  cv::rectangle(image, cv::Rect(100, 60, 120, 90), cv::Scalar(255, 255, 255), cv::FILLED);
  write_bytes(root / "images" / "a.jpg", encode_image(image, ".jpg", 95));
  write_text(root / "labels" / "a.txt", "0 0.32 0.35 0.24 0.3\n");
  return scan_images({root / "images" / "a.jpg"}, 1, {.threads = 1, .use_cache = false}).images;
}

// The box mapped back to original pixels is one_box_image's.
void check_original_box(const PixelBox& back) {
  CHECK(back.x1 == Approx(100).margin(0.5));
  CHECK(back.y1 == Approx(60).margin(0.5));
  CHECK(back.x2 == Approx(220).margin(0.5));
  CHECK(back.y2 == Approx(150).margin(0.5));
}

}  // namespace

TEST_CASE("rect batches: sorted by aspect ratio, one stride-multiple shape per batch", "[val_batches]") {
  std::vector<ImageRecord> records;
  for (const auto& [w, h] : std::vector<std::pair<int, int>>{{640, 480}, {480, 640}, {640, 640}, {640, 360}, {300, 600}, {640, 426}}) {
    ImageRecord& record = records.emplace_back();
    record.image = "x.jpg";
    record.width = w;
    record.height = h;
  }
  const auto plan = plan_rect_batches(records, 2, 640);
  REQUIRE(plan.batches.size() == 3);
  // aspect h/w ascending: 360/640, 426/640, 480/640, 1, 640/480, 600/300
  CHECK(plan.batches[0] == std::vector<std::size_t>{3, 5});
  CHECK(plan.batches[2] == std::vector<std::size_t>{1, 4});
  // all wide: [h, w] = [426/640, 1] -> ceil(0.666*20 + 0.5)*32 = 448 high, ceil(20.5)*32 = 672 wide
  CHECK(plan.shapes[0] == cv::Size(672, 448));
  // mixed (0.75 and 1.0): square
  CHECK(plan.shapes[1] == cv::Size(672, 672));
  // all tall: [1, 1/min] = [1, 0.75] -> 672 high, ceil(15.5)*32 = 512 wide
  CHECK(plan.shapes[2] == cv::Size(512, 672));
  for (const auto& shape : plan.shapes) {
    CHECK(shape.width % 32 == 0);
    CHECK(shape.height % 32 == 0);
  }
}

TEST_CASE("validation letterbox keeps ratio and maps boxes back to original pixels", "[val_batches]") {
  const auto root = fresh_folder("valbox");
  DetectionDataset dataset(one_box_image(root), 1, 320, CacheMode::none);
  const auto plan = plan_rect_batches({dataset.record(0)}, 1, 320);
  const ValSample sample = letterbox_for_validation(dataset, 0, plan.shapes[0]);
  CHECK(sample.sample.image.size() == plan.shapes[0]);
  CHECK(sample.original == cv::Size(500, 300));
  CHECK(sample.gain == Approx(320.0 / 500.0));
  const PixelBox back = to_original_pixels(sample.sample.boxes[0], sample);
  check_original_box(back);
  fs::remove_all(root);
}

TEST_CASE("validation stretch: every batch the square, boxes back per axis", "[val_batches]") {
  const auto root = fresh_folder("valstretch");
  DetectionDataset dataset(one_box_image(root), 1, 320, CacheMode::none);
  const auto records = std::vector<ImageRecord>(3, dataset.record(0));
  const auto plan = plan_validation_batches(records, 2, 320, InputFit::stretch);
  REQUIRE(plan.batches.size() == 2);
  CHECK(plan.batches[0] == std::vector<std::size_t>{0, 1});
  CHECK(plan.batches[1] == std::vector<std::size_t>{2});
  for (const auto& shape : plan.shapes) CHECK(shape == cv::Size(320, 320));
  const ValSample sample = fit_for_validation(dataset, 0, plan.shapes[0], InputFit::stretch);
  CHECK(sample.sample.image.size() == cv::Size(320, 320));
  CHECK(sample.gain == Approx(320.0 / 500.0));
  CHECK(sample.gain_y == Approx(320.0 / 300.0));
  const PixelBox box = sample.sample.boxes.at(0);
  CHECK(box.y1 == Approx(60 * 320.0 / 300.0).margin(0.5));  // stretched: the vertical scale is its own
  const PixelBox back = to_original_pixels(box, sample);
  check_original_box(back);
  fs::remove_all(root);
}

TEST_CASE("validation top-left letterbox: the imgsz square in dataset order, the image in its corner", "[val_batches]") {
  const auto root = fresh_folder("valtopleft");
  DetectionDataset dataset(one_box_image(root), 1, 320, CacheMode::none);
  const auto records = std::vector<ImageRecord>(3, dataset.record(0));
  const auto plan = plan_validation_batches(records, 2, 320, InputFit::letterbox_top_left);
  REQUIRE(plan.batches.size() == 2);
  CHECK(plan.batches[0] == std::vector<std::size_t>{0, 1});
  for (const auto& shape : plan.shapes) CHECK(shape == cv::Size(320, 320));
  const ValSample sample = fit_for_validation(dataset, 0, plan.shapes[0], InputFit::letterbox_top_left);
  const cv::Mat& image = sample.sample.image;
  REQUIRE(image.size() == cv::Size(320, 320));
  CHECK(sample.gain == Approx(320.0 / 500.0));
  CHECK(sample.pad == cv::Point2d(0, 0));
  // 500 x 300 -> 320 x 192 at the top: rows from 192 down are the grey border
  CHECK(image.at<cv::Vec3b>(191, 10) == cv::Vec3b(0, 0, 0));
  CHECK(image.at<cv::Vec3b>(192, 10) == cv::Vec3b(114, 114, 114));
  CHECK(image.at<cv::Vec3b>(319, 319) == cv::Vec3b(114, 114, 114));
  const PixelBox box = sample.sample.boxes.at(0);
  CHECK(box.y1 == Approx(60 * 320.0 / 500.0).margin(0.5));  // no vertical offset
  check_original_box(to_original_pixels(box, sample));
  fs::remove_all(root);
}

TEST_CASE("validation top-left letterbox truncates the resized sides, as LibreYOLO's dataset", "[val_batches]") {
  // 381 x 500 at 640: 487.68 columns -> 487 (Ultralytics' rule rounds up to 488)
  const auto root = fresh_folder("valtrunc");
  write_bytes(root / "images" / "a.jpg", encode_image(cv::Mat(500, 381, CV_8UC3, cv::Scalar(255, 255, 255)), ".jpg", 95));
  write_text(root / "labels" / "a.txt", "0 0.5 0.5 0.5 0.5\n");
  const auto records = scan_images({root / "images" / "a.jpg"}, 1, {.threads = 1, .use_cache = false}).images;
  CHECK(DetectionDataset(records, 1, 640, CacheMode::none).load_resized(0).image.size() == cv::Size(488, 640));
  DetectionDataset dataset(records, 1, 640, CacheMode::none, ResizeRule::truncate  /* the YOLOX pipeline's dataset */);
  CHECK(dataset.load_resized(0).image.size() == cv::Size(487, 640));
  const ValSample sample = fit_for_validation(dataset, 0, cv::Size(640, 640), InputFit::letterbox_top_left);
  const cv::Mat& image = sample.sample.image;
  CHECK(image.at<cv::Vec3b>(300, 486)[0] > 200);  // the white image, to its last column
  CHECK(image.at<cv::Vec3b>(300, 487) == cv::Vec3b(114, 114, 114));
  CHECK(sample.gain == Approx(640.0 / 500.0));
  fs::remove_all(root);
}
