#include "data/synth.h"

#include "core/atomic_file.h"
#include "core/error.h"
#include "data/image_io.h"
#include "data/sample_random.h"

#include <fmt/format.h>
#include <opencv2/imgproc.hpp>

#include <algorithm>

namespace libreyolo::data {

namespace fs = std::filesystem;

namespace {

enum Shape { square = 0, circle = 1, triangle = 2, cross = 3 };

struct Placed {
  int cls;
  cv::Rect box;  // pixel-exact extent of the drawn shape
};

cv::Scalar random_colour(SampleRandom& random, int low, int high) {
  return cv::Scalar(random.integer(low, high), random.integer(low, high), random.integer(low, high));
}

// Smooth colour noise + a few lines: enough texture that shapes must be recognised, not
// just thresholded.
cv::Mat background(int size, SampleRandom& random) {
  cv::Mat coarse(4 + random.integer(0, 6), 4 + random.integer(0, 6), CV_8UC3);
  for (int y = 0; y < coarse.rows; ++y) {
    for (int x = 0; x < coarse.cols; ++x) {
      coarse.at<cv::Vec3b>(y, x) = cv::Vec3b(static_cast<uchar>(random.integer(40, 200)),
                                             static_cast<uchar>(random.integer(40, 200)),
                                             static_cast<uchar>(random.integer(40, 200)));
    }
  }
  cv::Mat image;
  cv::resize(coarse, image, cv::Size(size, size), 0, 0, cv::INTER_CUBIC);
  const int lines = random.integer(4, 12);
  for (int i = 0; i < lines; ++i) {
    cv::line(image, {random.integer(0, size), random.integer(0, size)}, {random.integer(0, size), random.integer(0, size)},
             random_colour(random, 30, 220), random.integer(1, 2), cv::LINE_8);
  }
  return image;
}

void draw(cv::Mat& image, const Placed& shape, const cv::Scalar& colour) {
  const cv::Rect& b = shape.box;  // inclusive of x..x+width-1
  switch (shape.cls) {
    case square:
      cv::rectangle(image, b, colour, cv::FILLED, cv::LINE_8);
      break;
    case circle: {
      const int radius = (b.width - 1) / 2;
      cv::circle(image, {b.x + radius, b.y + radius}, radius, colour, cv::FILLED, cv::LINE_8);
      break;
    }
    case triangle: {
      const std::vector<cv::Point> points = {{b.x, b.y + b.height - 1}, {b.x + b.width - 1, b.y + b.height - 1},
                                             {b.x + (b.width - 1) / 2, b.y}};
      cv::fillPoly(image, std::vector<std::vector<cv::Point>>{points}, colour, cv::LINE_8);
      break;
    }
    default: {  // cross: two bars of a third of the size
      const int bar = std::max(2, b.width / 3);
      cv::rectangle(image, cv::Rect(b.x, b.y + (b.height - bar) / 2, b.width, bar), colour, cv::FILLED, cv::LINE_8);
      cv::rectangle(image, cv::Rect(b.x + (b.width - bar) / 2, b.y, bar, b.height), colour, cv::FILLED, cv::LINE_8);
      break;
    }
  }
}

std::vector<Placed> place_shapes(int size, SampleRandom& random) {
  std::vector<Placed> placed;
  const int wanted = random.integer(1, 5);
  placed.reserve(static_cast<std::size_t>(wanted));
  for (int attempt = 0; attempt < 60 && static_cast<int>(placed.size()) < wanted; ++attempt) {
    int side = static_cast<int>(random.uniform(0.08, 0.35) * size);
    side += (side % 2 == 0) ? 1 : 0;  // odd sides keep circles and triangles symmetric on the pixel grid
    const int cls = random.integer(0, 3);
    const int height = cls == triangle ? side * 3 / 4 + 1 : side;
    const cv::Rect box(random.integer(0, size - side), random.integer(0, size - height), side, height);
    const bool overlaps = std::any_of(placed.begin(), placed.end(), [&](const Placed& other) {
      const cv::Rect grown(other.box.x - 2, other.box.y - 2, other.box.width + 4, other.box.height + 4);
      return (grown & box).area() > 0;
    });
    if (!overlaps) placed.push_back({cls, box});
  }
  return placed;
}

int write_split(const SynthOptions& options, const std::string& split, int count, std::uint64_t stream) {
  const fs::path images = options.out / "images" / split;
  const fs::path labels = options.out / "labels" / split;
  fs::create_directories(images);
  fs::create_directories(labels);
  int boxes = 0;
  for (int index = 0; index < count; ++index) {
    SampleRandom random(options.seed, stream, static_cast<std::uint64_t>(index));
    cv::Mat image = background(options.image_size, random);
    const auto shapes = place_shapes(options.image_size, random);
    std::string label;
    for (const auto& shape : shapes) {
      ++boxes;
      draw(image, shape, random_colour(random, 0, 255));
      const double s = options.image_size;
      label += fmt::format("{} {:.6f} {:.6f} {:.6f} {:.6f}\n", shape.cls, (shape.box.x + shape.box.width / 2.0) / s,
                           (shape.box.y + shape.box.height / 2.0) / s, shape.box.width / s, shape.box.height / s);
    }
    const std::string stem = fmt::format("{:06d}", index);
    const std::vector<std::uint8_t> jpeg = encode_image(image, ".jpg", 95);
    write_file_atomically(images / (stem + ".jpg"), std::string_view(reinterpret_cast<const char*>(jpeg.data()), jpeg.size()));
    write_file_atomically(labels / (stem + ".txt"), label);
  }
  return boxes;
}

}  // namespace

const std::vector<std::string>& synth_class_names() {
  static const std::vector<std::string> names = {"square", "circle", "triangle", "cross"};
  return names;
}

SynthResult write_synthetic_dataset(const SynthOptions& options) {
  if (options.out.empty()) throw UsageError("out= is required: the folder to write the synthetic dataset into");
  SynthResult result;
  result.boxes = write_split(options, "train", options.train_images, 1);
  if (options.val_images > 0) result.boxes += write_split(options, "val", options.val_images, 2);
  result.images = options.train_images + options.val_images;
  result.yaml = options.out / "data.yaml";
  std::string yaml = fmt::format(
      "# Synthetic shapes (libreyolo data synth seed={} size={}): exact boxes, {} train / {} val images.\n"
      "path: .\ntrain: images/train\nval: {}\nnames:\n",
      options.seed, options.image_size, options.train_images, options.val_images,
      options.val_images > 0 ? "images/val" : "images/train");
  for (std::size_t i = 0; i < synth_class_names().size(); ++i) yaml += fmt::format("  {}: {}\n", i, synth_class_names()[i]);
  write_file_atomically(result.yaml, yaml);
  return result;
}

}  // namespace libreyolo::data
