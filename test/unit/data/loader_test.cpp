#include "data/dataset.h"
#include "data/image_io.h"
#include "data/label_scan.h"
#include "data/loader.h"
#include "data/sampling.h"
#include "data/pipeline.h"
#include "models/family.h"
#include "test_images.h"

#include <ATen/ATen.h>
#include <opencv2/imgproc.hpp>
#include "catch.h"  // last: see catch.h

using namespace libreyolo::data;
using namespace test_images;
namespace fs = std::filesystem;

namespace {

// 10 images of different sizes with 1-2 boxes each, one background.
std::vector<ImageRecord> small_dataset(const fs::path& root) {
  std::vector<fs::path> paths;
  for (int i = 0; i < 10; ++i) {
    const int w = 80 + 16 * i, h = 60 + 8 * (9 - i);
    cv::Mat image = gradient(w, h);
    cv::rectangle(image, cv::Rect(w / 4, h / 4, w / 3, h / 3), cv::Scalar(255, 255, 255), cv::FILLED);
    const auto path = root / "images" / ("img" + std::to_string(i) + ".jpg");
    write_bytes(path, jpeg_bytes(image));
    if (i != 7) {
      write_text(root / "labels" / ("img" + std::to_string(i) + ".txt"),
                 "0 " + std::to_string((0.25 + 1.0 / 6)) + " " + std::to_string(0.25 + 1.0 / 6) + " 0.3333 0.3333\n" +
                     (i % 2 ? "1 0.8 0.8 0.1 0.1\n" : ""));
    }
    paths.push_back(path);
  }
  auto scan = scan_images(paths, 2, {.threads = 1, .use_cache = false});
  REQUIRE(scan.images.size() == 10);
  return scan.images;
}

// A family's training sample pipeline (the loader runs what the family composes).
std::shared_ptr<const SamplePipeline> steps_of(std::string_view family) { return libreyolo::models::family(family).sample_pipeline(); }

std::vector<Batch> run_epoch(BatchSource& loader, int epoch) {
  loader.start_epoch(epoch);
  std::vector<Batch> batches;
  while (auto batch = loader.next()) batches.push_back(std::move(*batch));
  return batches;
}

}  // namespace

TEST_CASE("batches are identical whatever the number of workers", "[loader]") {
  const auto root = fresh_folder("loader");
  DetectionDataset dataset(small_dataset(root), 2, 128, CacheMode::none);
  for (const std::string_view family : {"yolo9", "yolov5", "yolox", "rtdetr", "dfine", "deim"}) {
    AugmentConfig augment;
    augment.image_size = 128;
    augment.mixup = 0.5;
    augment.degrees = 5;
    augment.shear = 2;
    TrainPipeline pipeline(dataset, augment, steps_of(family), 42);
    const auto make = [&](std::size_t index, int epoch, std::span<const std::size_t> batch) {
      return pipeline.sample(index, epoch, batch);
    };
    std::vector<std::vector<Batch>> runs;
    for (const int workers : {0, 1, 3}) {
      Loader loader(make, dataset.size(), {.batch_size = 4, .workers = workers, .seed = 7});
      CHECK(loader.batches_per_epoch() == 3);
      runs.push_back(run_epoch(loader, 1));
      runs.push_back(run_epoch(loader, 2));
    }
    INFO(family);
    for (std::size_t run = 2; run < runs.size(); ++run) {
      REQUIRE(runs[run].size() == runs[run % 2].size());
      for (std::size_t b = 0; b < runs[run].size(); ++b) {
        CHECK(runs[run][b].indices == runs[run % 2][b].indices);
        CHECK(at::equal(runs[run][b].images, runs[run % 2][b].images));
        CHECK(at::equal(runs[run][b].targets, runs[run % 2][b].targets));
      }
    }
    // epochs differ in order and augmentation
    CHECK_FALSE(at::equal(runs[0][0].images, runs[1][0].images));
    // shapes and target ranges
    const Batch& batch = runs[0][0];
    CHECK(batch.images.sizes() == at::IntArrayRef({4, 3, 128, 128}));
    CHECK(batch.images.scalar_type() == at::kByte);
    if (batch.targets.size(0) > 0) {
      CHECK(batch.targets.select(1, 2).min().item<float>() >= 0.0f);
      CHECK(batch.targets.select(1, 2).max().item<float>() <= 1.0f);
      CHECK(batch.targets.select(1, 0).max().item<float>() <= 3.0f);
    }
  }
  fs::remove_all(root);
}

TEST_CASE("the DETR pipeline stretches each image to the square, boxes on their pixels", "[loader]") {
  const auto root = fresh_folder("detr_pipeline");
  DetectionDataset dataset(small_dataset(root), 2, 128, CacheMode::none);
  AugmentConfig augment;
  augment.image_size = 96;
  augment.hsv_prob = 0;  // the white boxes stay white
  augment.flip_lr = 0.5;
  TrainPipeline pipeline(dataset, augment, steps_of("rtdetr"), 5);
  int flipped = 0;
  for (std::size_t i = 0; i < dataset.size(); ++i) {
    const Sample resized = dataset.load_original(i);  // stretched from the image at its own size
    for (int epoch = 0; epoch < 4; ++epoch) {
      const Sample out = pipeline.sample(i, epoch);
      REQUIRE(out.image.size() == cv::Size(96, 96));
      REQUIRE(out.boxes.size() == resized.boxes.size());
      if (out.boxes.empty()) continue;
      // the first box: the white rectangle, each axis scaled on its own (mirrored when flipped)
      const double rx = 96.0 / resized.image.cols, ry = 96.0 / resized.image.rows;
      const PixelBox& box = out.boxes[0];
      const PixelBox& before = resized.boxes[0];
      CHECK(box.y1 == Approx(before.y1 * ry).margin(1e-3));
      CHECK(box.y2 == Approx(before.y2 * ry).margin(1e-3));
      const bool mirrored = std::abs(box.x1 - before.x1 * rx) > 1e-3;
      if (mirrored) {
        ++flipped;
        CHECK(box.x1 == Approx(96 - before.x2 * rx).margin(1e-3));
      }
      cv::Mat gray;
      cv::cvtColor(out.image, gray, cv::COLOR_BGR2GRAY);
      const cv::Point centre(static_cast<int>((box.x1 + box.x2) / 2), static_cast<int>((box.y1 + box.y2) / 2));
      CHECK(gray.at<std::uint8_t>(centre) > 200);
    }
  }
  CHECK(flipped > 0);
  CHECK(flipped < 36);
  fs::remove_all(root);
}

TEST_CASE("D-FINE's and DEIM's pipeline: the strong stage on images with boxes while on, then flip and stretch", "[loader][dfine]") {
  const auto root = fresh_folder("dfine_pipeline");
  DetectionDataset dataset(small_dataset(root), 2, 128, CacheMode::none);
  for (const std::string_view family : {"dfine", "deim"}) {
    INFO(family);
    AugmentConfig augment;
    augment.image_size = 96;
    augment.flip_lr = 0;
    TrainPipeline pipeline(dataset, augment, steps_of(family), 11);
    CHECK(pipeline.strong_stage() == "the photometric distortion, zoom-out and IoU crop");
    const auto plain = [&](std::size_t i) {  // D-FINE starts from the long side at imgsz, DEIM from the image itself
      const Sample loaded = family == "dfine" ? dataset.load_resized(i) : dataset.load_original(i);
      return stretch_to(loaded, cv::Size(96, 96), /*area_when_shrinking=*/true);
    };
    int changed = 0;
    for (const bool strong : {true, false}) {
      pipeline.set_strong_enabled(strong);
      for (std::size_t i = 0; i < dataset.size(); ++i) {
        const Sample expected = plain(i);
        for (int epoch = 0; epoch < 3; ++epoch) {
          const Sample out = pipeline.sample(i, epoch);
          REQUIRE(out.image.size() == cv::Size(96, 96));
          for (const auto& box : out.boxes) {
            CHECK(box.width() > 1);
            CHECK(box.height() > 1);
            CHECK(box.x1 >= 0);
            CHECK(box.y2 <= 96);
          }
          const bool same = cv::norm(out.image, expected.image, cv::NORM_INF) == 0 && out.boxes.size() == expected.boxes.size();
          // off, and on an image without boxes (index 7), the weak stage alone: the plain stretch
          if (!strong || expected.boxes.empty()) {
            CHECK(same);
          } else {
            changed += !same;
          }
        }
      }
    }
    CHECK(changed > 20);  // of 27 samples with boxes: all but the few whose every op was skipped
  }
  fs::remove_all(root);
}

TEST_CASE("distributed shards split the epoch without overlap", "[loader]") {
  const auto make = [](std::size_t, int, std::span<const std::size_t>) {
    return Sample{cv::Mat(8, 8, CV_8UC3, cv::Scalar(0)), {}};
  };
  Loader rank0(make, 10, {.batch_size = 2, .workers = 0, .seed = 3, .rank = 0, .world_size = 2});
  Loader rank1(make, 10, {.batch_size = 2, .workers = 0, .seed = 3, .rank = 1, .world_size = 2});
  auto a = rank0.epoch_order(4);
  auto b = rank1.epoch_order(4);
  CHECK(a.size() == 5);
  CHECK(b.size() == 5);
  std::vector<std::size_t> all(a);
  all.insert(all.end(), b.begin(), b.end());
  std::sort(all.begin(), all.end());
  CHECK(std::unique(all.begin(), all.end()) == all.end());
  // 3 ranks over 10 images: padded to 12 by wrapping
  Loader third(make, 10, {.batch_size = 2, .workers = 0, .seed = 3, .rank = 2, .world_size = 3});
  CHECK(third.epoch_order(0).size() == 4);
}

TEST_CASE("a worker's exception reaches the consumer", "[loader]") {
  const auto make = [](std::size_t index, int, std::span<const std::size_t>) -> Sample {
    if (index == 3) throw std::runtime_error("broken image 3");
    return Sample{cv::Mat(8, 8, CV_8UC3, cv::Scalar(0)), {}};
  };
  Loader loader(make, 6, {.batch_size = 2, .workers = 2, .shuffle = false});
  loader.start_epoch(0);
  CHECK(loader.next().has_value());
  CHECK_THROWS_WITH(loader.next(), "broken image 3");
}

TEST_CASE("the RAM cache gives the same samples as decoding", "[loader]") {
  const auto root = fresh_folder("ramcache");
  const auto records = small_dataset(root);
  DetectionDataset plain(records, 2, 96, CacheMode::none);
  DetectionDataset cached(records, 2, 96, CacheMode::ram);
  REQUIRE(cached.cache_mode() == CacheMode::ram);
  for (std::size_t i = 0; i < plain.size(); ++i) {
    const Sample a = plain.load_resized(i);
    const Sample b = cached.load_resized(i);
    const Sample c = cached.load_resized(i);
    CHECK(std::max(a.image.cols, a.image.rows) == 96);
    CHECK(cv::norm(a.image, b.image, cv::NORM_INF) == 0);
    CHECK(cv::norm(b.image, c.image, cv::NORM_INF) == 0);
  }
  DetectionDataset disk(records, 2, 96, CacheMode::disk);
  REQUIRE(disk.cache_mode() == CacheMode::disk);
  const Sample first = disk.load_resized(2);   // writes the cache file
  const Sample second = disk.load_resized(2);  // reads it back
  CHECK(cv::norm(first.image, second.image, cv::NORM_INF) == 0);
  CHECK(cv::norm(first.image, plain.load_resized(2).image, cv::NORM_INF) == 0);
  CHECK(fs::exists(root / "images" / "img2.jpg.96.libreyolo"));
  fs::remove_all(root);
}

TEST_CASE("ResizeRule::truncate is LibreYOLO's load_resized_img: the full decode, int(w * r) bilinear, boxes times r",
          "[loader]") {
  // 850 x 567 at 320: r = 320 / 850, 213.45 rows -> 213 (Ultralytics' rule: 214 from a 1/2-scale
  // decode; 2 x 320 <= 850, so the JPEG decoder scales)
  const auto root = fresh_folder("truncate");
  cv::Mat image = gradient(850, 567);
  cv::rectangle(image, cv::Rect(100, 60, 300, 200), cv::Scalar(255, 255, 255), cv::FILLED);
  write_bytes(root / "images" / "a.jpg", jpeg_bytes(image));
  write_text(root / "labels" / "a.txt", "0 0.5 0.4 0.4 0.3\n");
  const auto records = scan_images({root / "images" / "a.jpg"}, 1, {.threads = 1, .use_cache = false}).images;
  const double r = 320.0 / 850.0;
  for (const CacheMode cache : {CacheMode::none, CacheMode::ram, CacheMode::disk}) {
    const DetectionDataset dataset(records, 1, 320, cache, ResizeRule::truncate);
    const Sample sample = dataset.load_resized(0);
    REQUIRE(sample.image.size() == cv::Size(320, 213));
    cv::Mat expected;
    cv::resize(decode_image(root / "images" / "a.jpg"), expected, cv::Size(320, 213), 0, 0, cv::INTER_LINEAR);
    CHECK(cv::norm(sample.image, expected, cv::NORM_INF) == 0);
    REQUIRE(sample.boxes.size() == 1);
    CHECK(sample.boxes[0].y1 == Approx((0.4 - 0.15) * 567 * r).epsilon(1e-6));  // r, not 213 / 567
    CHECK(sample.boxes[0].x2 == Approx(0.7 * 850 * r).epsilon(1e-6));
  }
  CHECK(fs::exists(root / "images" / "a.jpg.320t.libreyolo"));  // its own disk cache file
  const DetectionDataset ultralytics(records, 1, 320, CacheMode::none);
  CHECK(ultralytics.load_resized(0).image.size() == cv::Size(320, 214));
  CHECK(ultralytics.load_resized(0).boxes[0].y1 == Approx((0.4 - 0.15) * 214).epsilon(1e-6));
  fs::remove_all(root);
}

TEST_CASE("YOLOv5's mosaic draws partners from the whole dataset and puts the image in any tile; Ultralytics' keeps it "
          "top-left", "[loader]") {
  // 6 square images, each one box over all of it of its own class: with no jitter the mosaic's
  // top-left tile is the box that starts at the output's corner (0, 0)
  const auto root = fresh_folder("mosaic_tiles");
  std::vector<fs::path> paths;
  for (int i = 0; i < 6; ++i) {
    paths.push_back(root / "images" / ("img" + std::to_string(i) + ".jpg"));
    write_bytes(paths.back(), jpeg_bytes(gradient(128, 128)));
    write_text(root / "labels" / ("img" + std::to_string(i) + ".txt"), std::to_string(i) + " 0.5 0.5 1 1\n");
  }
  DetectionDataset dataset(scan_images(paths, 6, {.threads = 1, .use_cache = false}).images, 6, 128, CacheMode::none);
  const std::vector<std::size_t> pool(4, 0);  // a batch of image 0 alone
  for (const std::string_view family : {"yolo9", "yolov5"}) {
    AugmentConfig augment;
    augment.image_size = 128;
    augment.mosaic = 1.0, augment.hsv_prob = 0.0, augment.flip_lr = 0.0, augment.translate = 0.0;
    augment.scale_low = augment.scale_high = 1.0;
    TrainPipeline pipeline(dataset, augment, steps_of(family), 3);
    int elsewhere = 0, partners_outside_pool = 0, corners = 0;
    for (int epoch = 0; epoch < 24; ++epoch) {
      for (const PixelBox& box : pipeline.sample(0, epoch, pool).boxes) {
        if (box.cls != 0) ++partners_outside_pool;
        if (box.x1 < 0.5f && box.y1 < 0.5f) {
          ++corners;
          if (box.cls != 0) ++elsewhere;  // another image holds the top-left tile
        }
      }
    }
    INFO(family);
    CHECK(corners >= 20);  // the top-left tile is nearly always big enough to keep its box
    if (family == "yolo9") {
      CHECK(partners_outside_pool == 0);
      CHECK(elsewhere == 0);
    } else {
      CHECK(partners_outside_pool > 20);
      CHECK(elsewhere > 6);
    }
  }
  fs::remove_all(root);
}

TEST_CASE("no_aug switch: with mosaic off and no jitter a sample is the letterboxed image", "[loader]") {
  const auto root = fresh_folder("noaug");
  DetectionDataset dataset(small_dataset(root), 2, 128, CacheMode::none);
  AugmentConfig augment;
  augment.image_size = 128;
  augment.mosaic = 1.0;
  augment.mixup = 1.0;
  augment.hsv_prob = 0.0;
  augment.flip_lr = 0.0;
  augment.translate = 0.0;
  augment.scale_low = augment.scale_high = 1.0;
  TrainPipeline pipeline(dataset, augment, steps_of("yolo9"), 1);
  const Sample with_mosaic = pipeline.sample(3, 0);
  pipeline.set_strong_enabled(false);
  const Sample without = pipeline.sample(3, 0);
  const Sample resized = dataset.load_resized(3);
  const int pad = (128 - resized.image.rows) / 2;
  // the image sits centred (letterbox) and unchanged, the boxes are the image's own
  CHECK(cv::norm(without.image(cv::Rect(0, pad, 128, resized.image.rows)), resized.image, cv::NORM_INF) <= 1);
  CHECK(without.boxes.size() == resized.boxes.size());
  CHECK(with_mosaic.boxes.size() != without.boxes.size());
  fs::remove_all(root);
}

TEST_CASE("min_samples and class_balanced draw with replacement, reproducibly", "[loader]") {
  const auto make = [](std::size_t samples, std::vector<double> weights) {
    return Loader([](std::size_t, int, std::span<const std::size_t>) { return Sample{}; }, 4,
                  {.batch_size = 2, .workers = 0, .seed = 3, .samples_per_epoch = samples, .weights = std::move(weights)});
  };
  const auto floor = make(10, {});
  CHECK(floor.epoch_order(0).size() == 10);
  CHECK(floor.batches_per_epoch() == 5);
  CHECK(floor.epoch_order(1) == floor.epoch_order(1));
  CHECK(floor.epoch_order(1) != floor.epoch_order(2));
  const auto weighted = make(0, {0, 0, 1, 0});  // only image 2 can be drawn
  const auto order = weighted.epoch_order(0);
  CHECK(order == std::vector<std::size_t>{2, 2, 2, 2});
  CHECK(make(3, {}).epoch_order(0).size() == 4);  // a floor under the dataset size changes nothing
}

TEST_CASE("class_balanced weights are LVIS repeat factors", "[loader]") {
  const auto record = [](std::vector<int> classes) {
    ImageRecord r;
    r.image = "x.jpg";
    r.width = r.height = 10;
    for (const int c : classes) r.boxes.push_back({c, 0.5f, 0.5f, 0.1f, 0.1f});
    return r;
  };
  const DetectionDataset dataset({record({0}), record({0, 1}), record({0, 2, 2}), record({2}), record({})}, 3, 64, CacheMode::none);
  const auto weights = repeat_factors(dataset, 3);
  // 5 images: frequencies 0.6, 0.2, 0.4; median 0.4: class 1 repeats sqrt(0.4 / 0.2), the others 1
  REQUIRE(weights.size() == 5);
  CHECK(weights[0] == Approx(1.0));
  CHECK(weights[1] == Approx(std::sqrt(2.0)));
  CHECK(weights[2] == Approx(1.0));
  CHECK(weights[3] == Approx(1.0));
  CHECK(weights[4] == Approx(1.0));  // background keeps 1
}

TEST_CASE("a batch buffer still being copied from is not handed out again", "[loader]") {
  const auto make = [](std::size_t index, int, std::span<const std::size_t>) {
    return Sample{cv::Mat(8, 8, CV_8UC3, cv::Scalar::all(static_cast<double>(index))), {}};
  };
  Loader loader(make, 8, {.batch_size = 2, .workers = 0, .shuffle = false, .prefetch_batches = 1});
  loader.start_epoch(0);
  const void* first = nullptr;
  bool copy_done = false;
  {
    const auto batch = loader.next();
    REQUIRE(batch);
    first = batch->images.data_ptr();
    loader.release_after(batch->images, [&copy_done] { return copy_done; });
  }  // the consumer lets go of it; the (pretend) copy goes on
  for (int i = 0; i < 2; ++i) {
    const auto batch = loader.next();
    REQUIRE(batch);
    CHECK(batch->images.data_ptr() != first);  // not reused under the copy
    CHECK(batch->images[0][0][0][0].item<int>() == 2 + 2 * i);
  }
  copy_done = true;  // the copy finished: the pool's first buffer is handed out again
  const auto batch = loader.next();
  REQUIRE(batch);
  CHECK(batch->images.data_ptr() == first);
  CHECK(batch->images[0][0][0][0].item<int>() == 6);
}

// Another task's samples: what a classification task would move (an image and one label per
// image), through the same loader, collated by the task's own function.
namespace {
struct LabelledImage {
  cv::Mat image;
  int label = -1;
};

Batch collate_labels(const std::vector<LabelledImage>& samples, const std::vector<std::size_t>& indices, bool, at::Tensor images) {
  Batch batch;
  batch.indices = indices;
  const auto count = static_cast<std::int64_t>(samples.size());
  batch.images = images.defined() ? images : at::empty({count, 3, samples[0].image.rows, samples[0].image.cols}, at::kByte);
  batch.targets = at::empty({count}, at::kLong);
  for (std::int64_t i = 0; i < count; ++i) {
    const cv::Mat& image = samples[static_cast<std::size_t>(i)].image;
    batch.images[i].fill_(static_cast<std::int64_t>(image.at<cv::Vec3b>(0, 0)[0]));
    batch.targets[i].fill_(samples[static_cast<std::size_t>(i)].label);
  }
  return batch;
}
}  // namespace

TEST_CASE("The loader moves any task's samples: its order, workers and buffers, the task's collate", "[loader]") {
  const auto make = [](std::size_t index, int epoch, std::span<const std::size_t>) {
    return LabelledImage{cv::Mat(8, 8, CV_8UC3, cv::Scalar::all(static_cast<double>(index + 10 * epoch))), static_cast<int>(index % 3)};
  };
  const LoaderOptions options{.batch_size = 4, .workers = 0, .seed = 5};
  std::vector<std::vector<Batch>> runs;
  for (const int workers : {0, 2}) {
    LoaderOptions own = options;
    own.workers = workers;
    SampleLoader<LabelledImage> loader(make, collate_labels, 10, own);
    CHECK(loader.batches_per_epoch() == 3);
    // the same epoch order as detection's loader with the same options
    Loader detection([](std::size_t, int, std::span<const std::size_t>) { return Sample{}; }, 10, own);
    CHECK(loader.epoch_order(3) == detection.epoch_order(3));
    CHECK(loader.epoch_order(3) == epoch_order(own, 10, 3));
    runs.push_back(run_epoch(loader, 3));
  }
  REQUIRE(runs[0].size() == 3);
  for (std::size_t b = 0; b < 3; ++b) {
    CHECK(runs[0][b].indices == runs[1][b].indices);
    CHECK(at::equal(runs[0][b].images, runs[1][b].images));
    REQUIRE(runs[0][b].targets.scalar_type() == at::kLong);
    for (std::size_t i = 0; i < runs[0][b].indices.size(); ++i) {
      const auto index = runs[0][b].indices[i];
      CHECK(runs[0][b].targets[static_cast<std::int64_t>(i)].item<std::int64_t>() == static_cast<std::int64_t>(index % 3));
      CHECK(runs[0][b].images[static_cast<std::int64_t>(i)][0][0][0].item<std::uint8_t>() == index + 30);
    }
  }
}
