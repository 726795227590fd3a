// A classification dataset from a detection one (`libreyolo data crops`): every labelled box,
// grown by a margin and clipped to its image, cropped into an ImageFolder layout
// (out/train/<class>/, out/val/<class>/), boxes under a minimum side left out, the images split
// into train and val by a hash of their path under the dataset's root (so every crop of one image
// lands in one split; crops are named after that path and the box's index),
// and the classes that end up without a crop in either split left out of both.
#pragma once

#include "data/dataset_yaml.h"

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

namespace libreyolo::data {

struct BoxCropOptions {
  std::filesystem::path out;
  double margin = 0.1;        // added to each side, as a share of the box's side
  int min_size = 32;          // the crop's shorter side in pixels, at least
  double val_fraction = 0.2;  // share of the images whose crops go to val
  int workers = 2;
};

struct BoxCropResult {
  std::size_t images = 0;                  // images read
  std::size_t train = 0, val = 0;          // crops written
  std::size_t too_small = 0;               // boxes left out for min_size
  std::vector<std::string> classes;        // the class folders kept
  std::vector<std::string> dropped;        // classes without a crop in train or val (their crops removed)
};

// Refuses (DataError) an `out` that exists and is not empty, and a source without a labelled box.
BoxCropResult write_box_crops(const DatasetSpec& spec, const BoxCropOptions& options);

// Whether image `name` (its path under the root) goes to val at `fraction`: FNV-1a of the name,
// stable across machines.
bool crop_goes_to_val(const std::string& name, double fraction);

}  // namespace libreyolo::data
