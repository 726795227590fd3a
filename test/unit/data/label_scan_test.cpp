#include "data/label_scan.h"
#include "test_images.h"

#include <sys/stat.h>

#include <algorithm>
#include "catch.h"  // last: see catch.h

using namespace libreyolo::data;
using namespace test_images;
namespace fs = std::filesystem;

namespace {

// A dataset with one of every kind of problem; the expected counts are worked out by hand.
std::vector<fs::path> build_corrupted_dataset(const fs::path& root) {
  const auto images = root / "images";
  const auto labels = root / "labels";
  const auto good = jpeg_bytes(gradient(64, 48));
  std::vector<fs::path> paths;
  const auto add = [&](const std::string& name, const std::vector<std::uint8_t>& bytes, const std::string* label) {
    write_bytes(images / name, bytes);
    if (label != nullptr) write_text(labels / (fs::path(name).stem().string() + ".txt"), *label);
    paths.push_back(images / name);
  };
  const std::string box = "1 0.5 0.5 0.25 0.25\n";
  const std::string two_boxes_and_duplicate = "0 0.5 0.5 0.2 0.2\n2 0.3 0.3 0.1 0.1\n0 0.5 0.5 0.2 0.2\n";
  const std::string four_columns = "0 0.5 0.5 0.2\n";
  const std::string class_too_big = "7 0.5 0.5 0.2 0.2\n";
  const std::string negative = "0 -0.4 0.5 0.2 0.2\n";
  const std::string not_a_number = "0 0.5 NaN 0.2 0.2\n";
  const std::string empty;
  const std::string polygon = "2 0.1 0.1 0.4 0.1 0.4 0.5\n";
  auto truncated = good;
  truncated.resize(truncated.size() * 3 / 4);

  add("good1.jpg", good, &box);                                     // kept
  add("good2.jpg", good, &two_boxes_and_duplicate);                 // kept, 1 duplicate removed
  add("polygon.jpg", good, &polygon);                               // kept
  add("truncated.jpg", truncated, &box);                            // kept (decodes partly), warning
  add("empty_label.jpg", good, &empty);                             // kept, background
  add("missing_label.jpg", good, nullptr);                          // kept, background
  add("text.jpg", std::vector<std::uint8_t>{'h', 'e', 'l', 'l', 'o'}, &box);  // corrupt image
  add("four_columns.jpg", good, &four_columns);                     // corrupt label
  add("class_too_big.jpg", good, &class_too_big);                   // corrupt label (nc = 3)
  add("negative.jpg", good, &negative);                             // corrupt label
  add("nan.jpg", good, &not_a_number);                              // corrupt label
  add("tiny.jpg", jpeg_bytes(gradient(8, 8)), &box);                // corrupt image (< 10 px)
  return paths;
}

}  // namespace

TEST_CASE("a corrupted dataset gives exact kept/skipped counts and never crashes", "[label_scan]") {
  const auto root = fresh_folder("corrupted");
  const auto images = build_corrupted_dataset(root);
  const auto result = scan_images(images, 3, {.threads = 2, .use_cache = false});
  CHECK(result.images.size() == 6);
  CHECK(result.corrupt == 6);
  CHECK(result.backgrounds == 2);
  CHECK(result.missing_labels == 1);
  CHECK(result.duplicates_removed == 1);
  CHECK(result.summary() == "5 images, 2 backgrounds, 6 corrupt");
  const auto count_messages = [&](const std::string& text) {
    return std::count_if(result.messages.begin(), result.messages.end(),
                         [&](const std::string& message) { return message.find(text) != std::string::npos; });
  };
  CHECK(count_messages("ignoring corrupt image/label") == 6);
  CHECK(count_messages("5 columns") == 1);
  CHECK(count_messages("exceeds dataset class count 3") == 1);
  CHECK(count_messages("< 10 pixels") == 1);
  CHECK(count_messages("no end marker") == 1);
  // kept images keep their input order and boxes
  CHECK(result.images[0].image.filename() == "good1.jpg");
  CHECK(result.images[1].boxes.size() == 2);
  CHECK(result.images[0].width == 64);
  fs::remove_all(root);
}

TEST_CASE("the label cache is reused, and rebuilt when stale or unreadable", "[label_scan]") {
  const auto root = fresh_folder("cache");
  const auto images = build_corrupted_dataset(root);
  const auto first = scan_images(images, 3);
  CHECK_FALSE(first.from_cache);
  REQUIRE(fs::exists(first.cache_file));
  CHECK(first.cache_file == root / "labels.libreyolo.cache");

  const auto second = scan_images(images, 3);
  CHECK(second.from_cache);
  CHECK(second.summary() == first.summary());
  CHECK(second.images.size() == first.images.size());
  CHECK(second.images[1].boxes == first.images[1].boxes);

  // a different class count is a different key
  CHECK_FALSE(scan_images(images, 80).from_cache);

  // a changed label file makes the cache stale
  write_text(root / "labels" / "four_columns.txt", "0 0.5 0.5 0.2 0.2 \n");
  const auto after_fix = scan_images(images, 3);
  CHECK_FALSE(after_fix.from_cache);
  CHECK(after_fix.corrupt == 5);

  // garbage in the cache file is never trusted
  write_text(after_fix.cache_file, "{not json");
  const auto after_garbage = scan_images(images, 3);
  CHECK_FALSE(after_garbage.from_cache);
  CHECK(after_garbage.corrupt == 5);
  fs::remove_all(root);
}

TEST_CASE("a folder marked read-only gets no cache file", "[label_scan]") {
  const auto root = fresh_folder("readonly");
  const auto images = build_corrupted_dataset(root);
  ::chmod(root.c_str(), 0555);
  const auto result = scan_images(images, 3);
  CHECK_FALSE(fs::exists(result.cache_file));
  ::chmod(root.c_str(), 0755);
  fs::remove_all(root);
}

TEST_CASE("a label of binary junk is a corrupt label, and the cache is still written", "[label_scan]") {
  const auto root = fresh_folder("junk");
  const auto images = build_corrupted_dataset(root);
  write_text(root / "labels" / "four_columns.txt", std::string("\x89PNG\r\n\x1a\n\x00\xff\xfe junk", 17));
  const auto result = scan_images(images, 3);
  CHECK(fs::exists(result.cache_file));  // the message with the junk went into the JSON cache
  const auto junk = std::find_if(result.messages.begin(), result.messages.end(),
                                 [](const std::string& m) { return m.find("four_columns") != std::string::npos; });
  REQUIRE(junk != result.messages.end());
  INFO(*junk);
  CHECK(junk->find("\\x89PNG") != std::string::npos);
  CHECK(scan_images(images, 3).from_cache);
  fs::remove_all(root);
}
