#include "core/error.h"
#include "data/image_folder.h"
#include "test_images.h"

#include <filesystem>
#include <string>
#include <vector>

#include "catch.h"  // last: see catch.h

using namespace libreyolo;
using namespace test_images;
namespace fs = std::filesystem;

namespace {

void image(const fs::path& path) { write_bytes(path, jpeg_bytes(gradient(8, 8))); }

std::vector<std::string> names_of(const data::ImageFolderSplit& split) {
  std::vector<std::string> out;
  for (const auto& entry : split.images) out.push_back(fs::relative(entry.path, split.folder).string());
  return out;
}

template <class F>
std::string data_error_of(F&& f) {
  try {
    f();
  } catch (const DataError& error) {
    return error.what();
  }
  return "no DataError";
}

}  // namespace

TEST_CASE("ImageFolder: classes sorted from train, images in torchvision's order, counts per class", "[image_folder]") {
  const fs::path root = fresh_folder("image_folder");
  for (const char* split : {"train", "val"}) {
    image(root / split / "cat" / "b.jpg");
    image(root / split / "cat" / "A.PNG");  // any case of an extension
    image(root / split / "Zebra" / "z.jpeg");
    image(root / split / "dog" / "nested" / "x.jpg");
    image(root / split / "dog" / "y.jpg");
  }
  write_text(root / "train" / "cat" / "notes.txt", "not an image");
  const auto classes = data::image_folder_classes(root);
  CHECK(classes == std::vector<std::string>{"Zebra", "cat", "dog"});  // byte order, as Python's sorted()
  const auto train = data::scan_image_folder(root, "train", classes);
  // a folder's own files before its subfolders' (sorted(os.walk(...)))
  CHECK(names_of(train) == std::vector<std::string>{"Zebra/z.jpeg", "cat/A.PNG", "cat/b.jpg", "dog/y.jpg", "dog/nested/x.jpg"});
  CHECK(train.images[0].label == 0);
  CHECK(train.images[4].label == 2);
  CHECK(train.per_class() == std::vector<std::size_t>{1, 2, 2});
  CHECK(data::scan_image_folder(root, "val", classes).images.size() == 5);
  CHECK(data::is_image_folder_file("a.WebP"));
  CHECK_FALSE(data::is_image_folder_file("a.heic"));  // not in torchvision's list
}

TEST_CASE("ImageFolder: a missing split, a class in one split only, an empty class are refused by name", "[image_folder]") {
  const fs::path root = fresh_folder("image_folder_bad");
  CHECK_THAT(data_error_of([&] { (void)data::image_folder_classes(root); }),
             Catch::Contains((root / "train").string()) && Catch::Contains("root/train/<class>/"));
  image(root / "train" / "cat" / "a.jpg");
  image(root / "train" / "dog" / "a.jpg");
  const auto classes = data::image_folder_classes(root);
  CHECK_THAT(data_error_of([&] { (void)data::scan_image_folder(root, "val", classes); }), Catch::Contains("no such folder"));
  image(root / "val" / "cat" / "a.jpg");
  CHECK_THAT(data_error_of([&] { (void)data::scan_image_folder(root, "val", classes); }),
             Catch::Contains("lacks the class folder(s) dog"));
  image(root / "val" / "dog" / "a.jpg");
  image(root / "val" / "eel" / "a.jpg");
  CHECK_THAT(data_error_of([&] { (void)data::scan_image_folder(root, "val", classes); }),
             Catch::Contains("class folder(s) eel") && Catch::Contains("lacks"));
  fs::remove_all(root / "val" / "eel");
  CHECK(data::scan_image_folder(root, "val", classes).images.size() == 2);
  fs::create_directories(root / "train" / "emu");
  write_text(root / "train" / "emu" / "readme.txt", "no images");
  const auto with_emu = data::image_folder_classes(root);
  CHECK_THAT(data_error_of([&] { (void)data::scan_image_folder(root, "train", with_emu); }),
             Catch::Contains((root / "train" / "emu").string()) && Catch::Contains("no image in it"));
}
