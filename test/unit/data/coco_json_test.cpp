#include "data/coco_json.h"
#include "test_images.h"

#include <algorithm>
#include "catch.h"  // last: see catch.h

using namespace libreyolo::data;
using namespace test_images;

namespace {
bool says(const ScanResult& scan, const std::string& text) {
  return std::any_of(scan.messages.begin(), scan.messages.end(),
                     [&](const std::string& m) { return m.find(text) != std::string::npos; });
}
}  // namespace

TEST_CASE("a COCO box with a negative side is left out of both splits and named; a zero side stays for COCOeval",
          "[coco_json]") {
  const auto root = fresh_folder("coco_json");
  write_text(root / "images" / "a.jpg", "x");  // only the file's presence is read here
  write_text(root / "instances.json", R"({"images": [{"id": 1, "file_name": "a.jpg", "width": 100, "height": 80}],
    "annotations": [{"id": 11, "image_id": 1, "category_id": 3, "bbox": [10, 10, 20, 20], "area": 400},
                    {"id": 12, "image_id": 1, "category_id": 3, "bbox": [50, 10, -20, 20], "area": 400},
                    {"id": 13, "image_id": 1, "category_id": 3, "bbox": [50, 10, 20, -1]},
                    {"id": 14, "image_id": 1, "category_id": 3, "bbox": [5, 5, 0, 9], "area": 0}],
    "categories": [{"id": 3, "name": "car"}]})");
  const ScanResult scan = read_coco_split(root / "instances.json", root / "images", {3});
  REQUIRE(scan.images.size() == 1);
  const ImageRecord& image = scan.images[0];
  CHECK(image.boxes.size() == 1);        // training: the 20x20 box only
  CHECK(image.annotations.size() == 2);  // validation: the 20x20 box and the 0x9 one, as COCOeval counts them
  for (const auto& a : image.annotations) CHECK(a.w >= 0);
  CHECK(says(scan, "2 annotation(s) with a negative bbox width or height (id 12 (-20x20), id 13 (20x-1)); skipped in "
                   "training and validation"));
  CHECK(says(scan, "1 annotation(s) with a bbox width or height of 0 (id 14 (0x9))"));
  CHECK(scan.coco->annotations == 4);  // the file's count, as pycocotools gives it
}
