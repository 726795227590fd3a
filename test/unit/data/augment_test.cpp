// Geometric augmentations: paint white boxes, transform, and check that every transformed
// box covers the white pixels it stands for (and, without rotation, fits them tightly).
#include "data/augment/color.h"
#include "data/augment/geometry.h"
#include "data/augment/mosaic_mixup.h"
#include "data/augment/ssd.h"

#include <opencv2/imgproc.hpp>
#include "catch.h"  // last: see catch.h

using namespace libreyolo::data;

namespace {

Sample painted(cv::Size size, const std::vector<cv::Rect>& rects) {
  Sample sample;
  sample.image = cv::Mat(size, CV_8UC3, cv::Scalar(0, 0, 0));
  int cls = 0;
  for (const auto& rect : rects) {
    cv::rectangle(sample.image, rect, cv::Scalar(255, 255, 255), cv::FILLED);
    sample.boxes.push_back({cls++, static_cast<float>(rect.x), static_cast<float>(rect.y),
                            static_cast<float>(rect.x + rect.width), static_cast<float>(rect.y + rect.height)});
  }
  return sample;
}

// Bounding rectangle of the near-white pixels inside `box` grown by `margin`.
cv::Rect2f white_inside(const cv::Mat& image, const PixelBox& box, float margin) {
  cv::Mat gray;
  cv::cvtColor(image, gray, cv::COLOR_BGR2GRAY);
  const cv::Rect area = cv::Rect(cv::Point(static_cast<int>(box.x1 - margin), static_cast<int>(box.y1 - margin)),
                                 cv::Point(static_cast<int>(box.x2 + margin) + 1, static_cast<int>(box.y2 + margin) + 1)) &
                        cv::Rect(0, 0, image.cols, image.rows);
  std::vector<cv::Point> points;
  cv::findNonZero(gray(area) > 200, points);
  if (points.empty()) return {};
  const cv::Rect found = cv::boundingRect(points);
  return cv::Rect2f(static_cast<float>(found.x + area.x), static_cast<float>(found.y + area.y),
                    static_cast<float>(found.width), static_cast<float>(found.height));
}

// Every near-white pixel of the image lies inside some box (grown by `margin`).
bool boxes_cover_white(const Sample& sample, float margin) {
  cv::Mat gray;
  cv::cvtColor(sample.image, gray, cv::COLOR_BGR2GRAY);
  std::vector<cv::Point> points;
  cv::findNonZero(gray > 200, points);
  for (const auto& p : points) {
    bool covered = false;
    for (const auto& box : sample.boxes) {
      covered = covered || (p.x >= box.x1 - margin && p.x + 1 <= box.x2 + margin && p.y >= box.y1 - margin &&
                            p.y + 1 <= box.y2 + margin);
    }
    if (!covered) return false;
  }
  return true;
}

void check_tight(const Sample& sample, float tolerance) {
  for (const auto& box : sample.boxes) {
    const cv::Rect2f white = white_inside(sample.image, box, tolerance);
    INFO("box " << box.x1 << "," << box.y1 << " " << box.x2 << "," << box.y2 << "  white " << white.x << ","
                << white.y << " " << white.x + white.width << "," << white.y + white.height);
    REQUIRE(white.area() > 0);
    CHECK(std::abs(white.x - box.x1) <= tolerance);
    CHECK(std::abs(white.y - box.y1) <= tolerance);
    CHECK(std::abs(white.x + white.width - box.x2) <= tolerance);
    CHECK(std::abs(white.y + white.height - box.y2) <= tolerance);
  }
}

}  // namespace

TEST_CASE("flips move boxes with the pixels", "[augment]") {
  const Sample sample = painted({120, 80}, {{10, 5, 30, 20}, {70, 40, 40, 30}});
  check_tight(flip_horizontal(sample), 0.5f);
  check_tight(flip_vertical(sample), 0.5f);
  CHECK(flip_horizontal(sample).boxes[0].x1 == Approx(120 - 40));
}

TEST_CASE("letterbox and top-left fit keep boxes on the pixels", "[augment]") {
  const Sample sample = painted({200, 100}, {{20, 10, 60, 40}, {150, 50, 40, 45}});
  const auto boxed = letterbox(sample, {160, 160});
  CHECK(boxed.sample.image.size() == cv::Size(160, 160));
  CHECK(boxed.ratio == Approx(0.8));
  CHECK(boxed.pad.y == Approx(40));
  check_tight(boxed.sample, 1.5f);
  const auto fitted = fit_top_left(sample, {160, 160});
  CHECK(fitted.sample.image.at<cv::Vec3b>(150, 10) == cv::Vec3b(kPadValue, kPadValue, kPadValue));
  check_tight(fitted.sample, 1.5f);
  // mapping back: (box - pad) / ratio returns the original
  const auto& box = boxed.sample.boxes[0];
  CHECK((box.x1 - boxed.pad.x) / boxed.ratio == Approx(20).margin(0.01));
  CHECK((box.y2 - boxed.pad.y) / boxed.ratio == Approx(50).margin(0.01));
}

TEST_CASE("stretch scales each axis on its own and keeps boxes on the pixels", "[augment]") {
  const Sample source = painted(cv::Size(400, 200), {cv::Rect(40, 20, 100, 60), cv::Rect(300, 120, 40, 50)});
  const Sample out = stretch_to(source, cv::Size(160, 160));
  REQUIRE(out.image.size() == cv::Size(160, 160));
  REQUIRE(out.boxes.size() == 2);
  CHECK(out.boxes[0].x1 == Approx(40 * 0.4));
  CHECK(out.boxes[0].y1 == Approx(20 * 0.8));
  check_tight(out, 2.0f);
  const Sample same = stretch_to(source, source.image.size());
  CHECK(cv::norm(same.image, source.image, cv::NORM_INF) == 0);
  CHECK(same.image.data != source.image.data);  // a copy: the caller may change it in place
}

TEST_CASE("random perspective: scale and translation keep boxes tight; rotation and shear keep them covering", "[augment]") {
  const Sample sample = painted({320, 320}, {{40, 60, 80, 50}, {200, 180, 60, 90}});
  for (std::uint64_t seed = 0; seed < 8; ++seed) {
    SampleRandom random(seed, 0, 0);
    const PerspectiveParams scale_only{0, 0.1, 0.6, 1.4, 0, 0};
    const Sample moved = random_perspective(sample, scale_only, {320, 320}, random);
    INFO("seed " << seed);
    check_tight(moved, 2.0f);
    CHECK(boxes_cover_white(moved, 1.5f));

    SampleRandom random2(seed, 1, 0);
    const PerspectiveParams full{15, 0.1, 0.6, 1.4, 5, 0};
    const Sample rotated = random_perspective(sample, full, {320, 320}, random2);
    CHECK(boxes_cover_white(rotated, 1.5f));
  }
}

TEST_CASE("YOLOX random affine keeps boxes covering the pixels", "[augment]") {
  const Sample sample = painted({256, 256}, {{30, 30, 60, 40}, {150, 120, 50, 80}});
  for (std::uint64_t seed = 0; seed < 8; ++seed) {
    SampleRandom random(seed, 0, 0);
    const Sample moved = random_affine(sample, {10, 0.1, 0.5, 1.5, 2, 0}, {256, 256}, random);
    INFO("seed " << seed);
    CHECK(boxes_cover_white(moved, 1.5f));
    SampleRandom random2(seed, 0, 0);
    check_tight(random_affine(sample, {0, 0.1, 0.5, 1.5, 0, 0}, {256, 256}, random2), 2.0f);
  }
}

TEST_CASE("box candidates drop boxes squashed or pushed out by a transform", "[augment]") {
  CHECK(box_candidate({0, 0, 0, 100, 100}, {0, 10, 10, 60, 60}));
  CHECK_FALSE(box_candidate({0, 0, 0, 100, 100}, {0, 10, 10, 12, 60}));   // 2 px wide
  CHECK_FALSE(box_candidate({0, 0, 0, 100, 100}, {0, 0, 0, 20, 20}));     // 4 % of the area left
  CHECK_FALSE(box_candidate({0, 0, 0, 1000, 1000}, {0, 0, 0, 500, 4.5}));  // aspect > 100
}

TEST_CASE("mosaic places four tiles around the centre with their boxes", "[augment]") {
  std::array<Sample, 4> tiles = {painted({100, 80}, {{10, 10, 30, 20}}), painted({100, 100}, {{60, 50, 20, 40}}),
                                 painted({80, 100}, {{5, 70, 50, 20}}), painted({100, 60}, {{40, 5, 30, 30}})};
  for (const auto& [xc, yc] : std::vector<std::pair<int, int>>{{100, 100}, {60, 140}, {150, 70}}) {
    const Sample mosaic = mosaic4(tiles, {100, 100}, xc, yc);
    INFO("centre " << xc << "," << yc);
    CHECK(mosaic.image.size() == cv::Size(200, 200));
    CHECK(boxes_cover_white(mosaic, 0.5f));
    check_tight(mosaic, 0.5f);
  }
  // at the canvas centre every tile is whole, so all four boxes survive
  CHECK(mosaic4(tiles, {100, 100}, 100, 100).boxes.size() == 4);
}

TEST_CASE("mixups keep both label sets on the blended pixels", "[augment]") {
  const Sample a = painted({128, 128}, {{10, 10, 40, 40}});
  const Sample b = painted({128, 128}, {{70, 70, 40, 40}});
  SampleRandom random(3, 0, 0);
  const Sample beta = mixup_beta(a, b, random);
  CHECK(beta.boxes.size() == 2);
  const Sample yolox = mixup_jittered_paste(a, b, {1.0, 1.0}, random);
  CHECK(yolox.boxes.size() == 2);
  CHECK(yolox.image.size() == a.image.size());
}

TEST_CASE("HSV jitter changes colour, not geometry, and is deterministic per seed", "[augment]") {
  const Sample sample = painted({64, 64}, {{10, 10, 20, 20}});
  cv::Mat colourful(64, 64, CV_8UC3, cv::Scalar(40, 120, 200));
  cv::Mat a = colourful.clone(), b = colourful.clone(), c = colourful.clone();
  SampleRandom r1(1, 0, 0), r2(1, 0, 0);
  hsv_multiplicative(a, 0.015, 0.7, 0.4, r1);
  hsv_multiplicative(b, 0.015, 0.7, 0.4, r2);
  CHECK(cv::norm(a, b, cv::NORM_INF) == 0);
  CHECK(cv::norm(a, colourful, cv::NORM_INF) > 0);
  SampleRandom r3(5, 0, 0);
  hsv_additive(c, 5, 30, 30, r3);
  CHECK(c.size() == colourful.size());
}

TEST_CASE("zoom-out and IoU crop keep boxes on the pixels, within torchvision's ranges", "[augment][dfine]") {
  const Sample source = painted({160, 120}, {{20, 15, 40, 30}, {100, 60, 35, 45}, {70, 10, 12, 12}});
  int zoomed = 0, cropped = 0;
  for (std::uint64_t seed = 0; seed < 60; ++seed) {
    SampleRandom random(seed, 0, 0);
    FramedSample framed = FramedSample::of(source);
    zoom_out(framed, random, /*p=*/seed % 2 ? 1.0 : 0.0);
    const cv::Size canvas = framed.window.size();
    INFO("seed " << seed);
    if (seed % 2) {  // r in [1, 4): the canvas int(w r) x int(h r)
      ++zoomed;
      CHECK(canvas.width >= 160);
      CHECK(canvas.width < 640);
      CHECK(std::abs(canvas.width / 160.0 - canvas.height / 120.0) < 0.02);
      CHECK(framed.offset.x >= 0);
      CHECK(framed.offset.x + 160 <= canvas.width);
    } else {
      CHECK(canvas == cv::Size(160, 120));
    }
    const std::size_t before = framed.boxes.size();
    const bool crop = iou_crop(framed, random);
    cropped += crop;
    if (crop) {
      const double sw = static_cast<double>(framed.window.width) / canvas.width, sh = static_cast<double>(framed.window.height) / canvas.height;
      CHECK(sw >= 0.3 - 1e-9);
      CHECK(sh >= 0.3 - 1e-9);
      CHECK(framed.window.x >= 0);
      CHECK(framed.window.x + framed.window.width <= canvas.width);
      const double aspect = static_cast<double>(framed.window.width) / framed.window.height;
      CHECK(aspect >= 0.5);
      CHECK(aspect <= 2.0);
      CHECK_FALSE(framed.boxes.empty());  // at least one centre inside
      CHECK(framed.boxes.size() <= before);
    } else {
      CHECK(framed.boxes.size() == before);
    }
    Sample out = framed.paint();
    sanitize_boxes(out.boxes, out.image.size());
    REQUIRE(out.image.size() == framed.window.size());
    // boxes clamped to the crop and tight on their (clipped) white; black where the canvas has no image
    check_tight(out, 0.5f);
    const cv::Rect placed = cv::Rect(framed.offset, cv::Size(160, 120)) - framed.window.tl();
    const cv::Rect outside = cv::Rect(0, 0, out.image.cols, out.image.rows) & cv::Rect(placed.x + placed.width, 0, 1 << 20, 1 << 20);
    if (!outside.empty()) CHECK(cv::countNonZero(out.image(outside).reshape(1)) == 0);
  }
  CHECK(zoomed == 30);
  CHECK(cropped > 15);  // a bound of 1.0 (one option in seven) and p 0.8 of the pipeline: most crop
  CHECK(cropped < 60);
}

TEST_CASE("sanitize drops boxes under a pixel and outside the canvas", "[augment][dfine]") {
  std::vector<PixelBox> boxes{{0, 1, 1, 5, 5}, {1, 1, 1, 1.9f, 9}, {2, -1, 0, 5, 5}, {3, 1, 1, 11, 5}, {4, 0, 0, 10, 10},
                              {5, 3, 3, 3, 3}};
  sanitize_boxes(boxes, {10, 10});
  REQUIRE(boxes.size() == 2);
  CHECK(boxes[0].cls == 0);
  CHECK(boxes[1].cls == 4);
}

TEST_CASE("the photometric distortion writes a new image and follows its draw", "[augment][dfine]") {
  cv::Mat image(16, 16, CV_8UC3, cv::Scalar(40, 120, 200));
  const cv::Mat before = image.clone();
  PhotometricDraw none;
  cv::Mat same = apply_photometric(image, none);
  CHECK(same.data != image.data);
  CHECK(cv::norm(same, image, cv::NORM_INF) == 0);
  PhotometricDraw swap;
  swap.permutation = std::array<int, 3>{2, 1, 0};
  const cv::Mat swapped = apply_photometric(image, swap);
  CHECK(swapped.at<cv::Vec3b>(3, 3) == cv::Vec3b(200, 120, 40));
  PhotometricDraw bright;
  bright.brightness = 1.1;
  CHECK(apply_photometric(image, bright).at<cv::Vec3b>(0, 0) == cv::Vec3b(44, 132, 220));  // trunc(x * 1.1)
  CHECK(cv::norm(image, before, cv::NORM_INF) == 0);  // never written to
  // the draws: each op about half the time, deterministic per seed
  int drawn = 0;
  for (std::uint64_t seed = 0; seed < 200; ++seed) {
    SampleRandom a(seed, 1, 2), b(seed, 1, 2);
    const PhotometricDraw x = draw_photometric(a), y = draw_photometric(b);
    CHECK(x.brightness == y.brightness);
    drawn += x.hue.has_value();
    if (x.hue) CHECK(std::abs(*x.hue) <= 0.05);
    if (x.contrast) CHECK((*x.contrast >= 0.5 && *x.contrast <= 1.5));
  }
  CHECK(drawn > 70);
  CHECK(drawn < 130);
}
