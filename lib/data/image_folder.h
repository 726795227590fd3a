// Classification datasets in the ImageFolder layout (torchvision's, which libreyolo 1.6.0 reads):
// root/<split>/<class>/**/<image>. The classes are the train split's folder names in sorted
// (byte) order; every other split must hold the same class folders. Listing only: images are
// decoded later, and an unreadable one is reported where it is read.
#pragma once

#include "data/dataset_yaml.h"

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

namespace libreyolo::data {

struct ClassImage {
  std::filesystem::path path;
  int label = 0;  // index into the classes
};

struct ImageFolderSplit {
  std::string split;                 // "train", "val", ...
  std::filesystem::path folder;      // root/split
  std::vector<std::string> classes;  // the train split's, sorted
  std::vector<ClassImage> images;    // class by class; within a class as torchvision lists them
  std::vector<std::size_t> per_class() const;  // images of each class
};

// torchvision's image extensions (IMG_EXTENSIONS), any case: what ImageFolder lists.
bool is_image_folder_file(const std::filesystem::path& path);

// The class names of an ImageFolder dataset: the folders of root/train, sorted. DataError (naming
// the folder and the layout) without root/train or without a class folder in it.
std::vector<std::string> image_folder_classes(const std::filesystem::path& root);

// One split's images under `classes` (image_folder_classes). DataError naming the folder for a
// missing split, a class folder the split lacks or adds, or a class folder without an image.
ImageFolderSplit scan_image_folder(const std::filesystem::path& root, const std::string& split,
                                   const std::vector<std::string>& classes);

// `data=` of a classification run: an ImageFolder root (holding train/), one of its split folders
// (train/, val/ or test/: the root is its parent), or a data YAML whose `path` is such a root
// (`train`/`val`/`test` name its split folders, by default train and val; `names`, when given,
// must be the class folders in order). The spec's splits are root/<split> where present and its
// names the classes. DataError naming the path otherwise.
DatasetSpec image_folder_spec(const std::string& data);

// Whether `data` is a folder in the ImageFolder layout (train/<class>/ folders, no labels/ folder
// of a YOLO layout): what `data check` takes for a classification set when no task or model says.
bool is_image_folder_root(const std::filesystem::path& data);

}  // namespace libreyolo::data
