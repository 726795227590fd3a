// COCO-format datasets: an instances_*.json (images, annotations, categories) over a folder of
// images, read into the records training and validation use. Sparse category ids become classes
// 0..N-1 in ascending id order (or by name against a YAML's names) and map back in predictions;
// crowd regions and empty boxes are left out of training and kept for validation, as COCOeval
// reads the JSON.
#pragma once

#include "data/label_scan.h"

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace libreyolo::data {

struct CocoCategory {
  std::int64_t id = 0;
  std::string name;
};

// The categories of a COCO JSON, ascending by id (the images and annotations are skipped while
// parsing). Throws DataError naming the file for an unreadable or invalid JSON.
std::vector<CocoCategory> read_coco_categories(const std::filesystem::path& json);

// The image folder of a COCO JSON given without one: under `root`, images/<name>, <name>,
// images/<split>, <split> or images, where <name> is the JSON's stem without "instances_"
// (instances_val2017.json: val2017); the first that exists. Throws DataError naming what was
// looked for.
std::filesystem::path find_coco_image_folder(const std::filesystem::path& root, const std::string& split,
                                             const std::filesystem::path& json);

// Every image of the JSON (file_name under `image_folder`), in the JSON's order, with its boxes
// for training and its annotations for validation; `category_ids[c]` is class c's category id.
// Images whose file is missing are skipped (corrupt) with a message; annotations of an image the
// JSON does not list are skipped with one. Throws DataError for an invalid JSON, naming the file
// and the entry.
ScanResult read_coco_split(const std::filesystem::path& json, const std::filesystem::path& image_folder,
                           const std::vector<std::int64_t>& category_ids);

}  // namespace libreyolo::data
