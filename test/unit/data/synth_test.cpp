#include "data/dataset_yaml.h"
#include "data/image_io.h"
#include "data/label_scan.h"
#include "data/synth.h"
#include "test_images.h"
#include "test_util.h"

#include <fstream>
#include <sstream>
#include "catch.h"  // last: see catch.h

using namespace libreyolo::data;
using namespace test_images;
namespace fs = std::filesystem;

using test_util::read_all;

TEST_CASE("synth writes a valid YOLO dataset, the same bytes for the same seed", "[synth]") {
  const auto root = fresh_folder("synth");
  const auto a = write_synthetic_dataset({root / "a", 12, 4, 128, 5});
  const auto b = write_synthetic_dataset({root / "b", 12, 4, 128, 5});
  const auto c = write_synthetic_dataset({root / "c", 12, 4, 128, 6});
  CHECK(a.images == 16);
  CHECK(a.boxes == b.boxes);
  for (const auto& name : {"images/train/000003.jpg", "labels/train/000003.txt", "labels/val/000001.txt", "data.yaml"}) {
    INFO(name);
    CHECK(read_all(root / "a" / name) == read_all(root / "b" / name));
  }
  CHECK(read_all(root / "a" / "images/train/000003.jpg") != read_all(root / "c" / "images/train/000003.jpg"));

  const auto spec = load_dataset_spec(a.yaml.string());
  CHECK(spec.names == synth_class_names());
  const auto scan = scan_images(list_images(spec.train, "train"), spec.class_count(), {.threads = 1, .use_cache = false});
  CHECK(scan.images.size() == 12);
  CHECK(scan.corrupt == 0);
  fs::remove_all(root);
}

TEST_CASE("synthetic boxes are exact: the shape's colour fills the box edges and not beyond", "[synth]") {
  const auto root = fresh_folder("synthbox");
  write_synthetic_dataset({root, 6, 0, 160, 11});
  const auto scan = scan_images(list_images({root / "images" / "train"}, "train"), 4, {.threads = 1, .use_cache = false});
  int checked = 0;
  for (const auto& record : scan.images) {
    const cv::Mat image = decode_image(record.image);
    for (const auto& box : record.boxes) {
      if (box.cls != 0) continue;  // squares: every pixel of the box is the shape
      const int x1 = static_cast<int>(std::lround((box.cx - box.w / 2) * 160));
      const int y1 = static_cast<int>(std::lround((box.cy - box.h / 2) * 160));
      const int x2 = static_cast<int>(std::lround((box.cx + box.w / 2) * 160));
      const int y2 = static_cast<int>(std::lround((box.cy + box.h / 2) * 160));
      const cv::Mat inside = image(cv::Rect(x1 + 2, y1 + 2, x2 - x1 - 4, y2 - y1 - 4));
      cv::Scalar mean, deviation;
      cv::meanStdDev(inside, mean, deviation);
      // a flat colour (JPEG noise only) fills the square
      CHECK(deviation[0] < 6);
      ++checked;
    }
  }
  CHECK(checked > 0);
  fs::remove_all(root);
}
