#include "core/error.h"
#include "data/dataset_yaml.h"
#include "test_images.h"

#include <cstdlib>
#include "catch.h"  // last: see catch.h

using namespace libreyolo;
using namespace libreyolo::data;
using namespace test_images;
namespace fs = std::filesystem;

namespace {
std::string data_error_of(const std::string& data) {
  try {
    load_dataset_spec(data);
  } catch (const DataError& error) {
    return error.what();
  }
  return "";
}
}  // namespace

TEST_CASE("a data YAML resolves path, splits, names as a list or a dict", "[dataset_yaml]") {
  const auto root = fresh_folder("yaml");
  write_text(root / "ds" / "images" / "train" / "a.jpg", "x");
  write_text(root / "list.yaml", "path: ds\ntrain: images/train\nval: [images/train, extra.txt]\nnames: [cat, dog]\n");
  const auto spec = load_dataset_spec((root / "list.yaml").string());
  CHECK(spec.root == root / "ds");
  REQUIRE(spec.train.size() == 1);
  CHECK(spec.train[0] == root / "ds" / "images" / "train");
  CHECK(spec.val.size() == 2);
  CHECK(spec.names == std::vector<std::string>{"cat", "dog"});
  CHECK(spec.class_count() == 2);

  write_text(root / "dict.yaml", "train: ds/images/train\nnames:\n  0: person\n  1: car\nnc: 2\n");
  const auto dict = load_dataset_spec((root / "dict.yaml").string());
  CHECK(dict.root == root);
  CHECK(dict.names == std::vector<std::string>{"person", "car"});

  // nc without names: the classes named as LibreYOLO and Ultralytics name them
  write_text(root / "nc_only.yaml", "train: ds/images/train\nnc: 3\n");
  const auto nc_only = load_dataset_spec((root / "nc_only.yaml").string());
  CHECK(nc_only.names == std::vector<std::string>{"class_0", "class_1", "class_2"});
  fs::remove_all(root);
}

TEST_CASE("YAML mistakes name the file and the key", "[dataset_yaml]") {
  const auto root = fresh_folder("yamlerrors");
  write_text(root / "no_names.yaml", "train: images\n");
  CHECK(data_error_of((root / "no_names.yaml").string()).find("'names' is missing") != std::string::npos);
  write_text(root / "nc.yaml", "train: images\nnames: [a, b]\nnc: 3\n");
  CHECK(data_error_of((root / "nc.yaml").string()).find("nc=3 but 'names' has 2") != std::string::npos);
  write_text(root / "nc0.yaml", "train: images\nnc: 0\n");
  CHECK(data_error_of((root / "nc0.yaml").string()).find("nc=0 must be from 1 to") != std::string::npos);
  write_text(root / "gap.yaml", "train: images\nnames: {0: a, 2: c}\n");
  CHECK(data_error_of((root / "gap.yaml").string()).find("class 1 is missing") != std::string::npos);
  write_text(root / "no_train.yaml", "names: [a]\n");
  CHECK(data_error_of((root / "no_train.yaml").string()).find("'train'") != std::string::npos);
  write_text(root / "bad.yaml", "train: [a,\n");
  CHECK(data_error_of((root / "bad.yaml").string()).find("not valid YAML") != std::string::npos);
  CHECK(data_error_of((root / "absent.yaml").string()).find("no such file") != std::string::npos);
  // a folder: named as one, with the YAML it holds, or saying none is there
  fs::create_directories(root / "plain");
  CHECK(data_error_of((root / "plain").string()).find("is a folder without a dataset YAML") != std::string::npos);
  CHECK(data_error_of(root.string()).find("is a folder: give its dataset YAML, e.g. data=" + (root / "bad.yaml").string()) !=
        std::string::npos);
  fs::remove_all(root);
}

TEST_CASE("built-in names resolve against LIBREYOLO_DATASETS and say where to get data", "[dataset_yaml]") {
  const auto root = fresh_folder("builtin");
  ::setenv("LIBREYOLO_DATASETS", root.c_str(), 1);
  const auto message = data_error_of("coco8");
  CHECK(message.find("coco8.zip") != std::string::npos);
  CHECK(message.find((root / "coco8").string()) != std::string::npos);
  fs::create_directories(root / "coco128" / "images" / "train2017");
  const auto spec = load_dataset_spec("coco128.yaml");
  CHECK(spec.builtin_name == "coco128");
  CHECK(spec.train.at(0) == root / "coco128" / "images" / "train2017");
  CHECK(spec.class_count() == 80);
  ::unsetenv("LIBREYOLO_DATASETS");
  fs::remove_all(root);
}

TEST_CASE("image lists: folders recursively and sorted, .txt lists relative to the list", "[dataset_yaml]") {
  const auto root = fresh_folder("lists");
  write_text(root / "images" / "b.jpg", "x");
  write_text(root / "images" / "sub" / "a.png", "x");
  write_text(root / "images" / "notes.txt", "x");
  write_text(root / "list.txt", "./images/b.jpg\nimages/sub/a.png\n\n");
  const auto from_folder = list_images({root / "images"}, "train");
  REQUIRE(from_folder.size() == 2);
  CHECK(from_folder[0] == root / "images" / "b.jpg");
  const auto from_list = list_images({root / "list.txt"}, "train");
  REQUIRE(from_list.size() == 2);
  CHECK(from_list[1] == root / "images" / "sub" / "a.png");
  try {
    list_images({root / "nope"}, "val");
    FAIL("expected a DataError");
  } catch (const DataError& error) {
    CHECK(std::string(error.what()).find("'val' source") != std::string::npos);
  }
  fs::remove_all(root);
}
