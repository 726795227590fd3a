// Dataset YAML in the Ultralytics/LibreYOLO format (path, train, val, test, names, nc,
// download), with the built-in names coco8, coco128 and coco resolved through
// share/libreyolo/datasets against $LIBREYOLO_DATASETS (default ./datasets). COCO JSON splits:
// LibreYOLO's `annotations: {train: a.json, val: b.json}` beside the image folders, a split that
// names an instances_*.json itself, or data=instances_val.json alone (both splits).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace libreyolo::data {

struct DatasetSpec {
  std::filesystem::path yaml_file;  // the YAML that was read
  std::string builtin_name;         // "coco8", ... for built-ins; empty otherwise
  std::filesystem::path root;       // `path`, resolved
  std::vector<std::filesystem::path> train;  // sources: image folders, .txt lists or image files
  std::vector<std::filesystem::path> val;
  std::vector<std::filesystem::path> test;
  std::vector<std::string> names;   // index = class id
  std::string download;
  int label_classes = 0;            // class ids the label files may hold when single_cls merged them (0: class_count())
  // COCO JSON splits: split -> its instances_*.json (the split's source is then its image folder),
  // and each class's category id in those files (class c is category_ids[c]).
  std::map<std::string, std::filesystem::path> annotations;
  std::vector<std::int64_t> category_ids;

  int class_count() const { return static_cast<int>(names.size()); }
  // single_cls: every class becomes class 0, "item" (as Ultralytics names it); labels are still
  // checked against the YAML's classes.
  void merge_classes();
  const std::vector<std::filesystem::path>& split(const std::string& name) const;
  // The split's COCO JSON, or nullptr for YOLO labels.
  const std::filesystem::path* annotation_file(const std::string& split) const;
  // The category id a predicted class is written with (predictions.json): COCO JSON's, else the class.
  std::int64_t category_id(int cls) const;
};

// `data` is a YAML path, a COCO JSON or a built-in name. Throws DataError naming the file and key.
DatasetSpec load_dataset_spec(const std::string& data);

// The folder built-in datasets live in: $LIBREYOLO_DATASETS, else ./datasets.
std::filesystem::path datasets_dir();

// Image files of a split, sorted within each source: folders are walked recursively, .txt
// files list one image per line (relative to the list's folder). Throws DataError when a
// source is missing, naming `split`.
std::vector<std::filesystem::path> list_images(const std::vector<std::filesystem::path>& sources,
                                               const std::string& split);

bool has_image_extension(const std::filesystem::path& path);
// A COCO annotation file by its name (.json, any case).
bool is_json_file(const std::filesystem::path& path);

}  // namespace libreyolo::data
