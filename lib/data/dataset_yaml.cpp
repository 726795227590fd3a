#include "data/dataset_yaml.h"

#include "data/coco_json.h"

#include "core/checked_size.h"
#include "core/error.h"
#include "core/log.h"
#include "core/share_files.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>

namespace libreyolo::data {

namespace fs = std::filesystem;

namespace {

constexpr std::array<std::string_view, 3> kBuiltins{"coco8", "coco128", "coco"};

// Whether a path names something, with no exception: a name too long or unreadable names nothing
// a dataset can use (the messages below say which path was looked for).
bool present(const fs::path& path) {
  std::error_code error;
  return fs::exists(path, error);
}

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

fs::path find_builtin_yaml(const std::string& name) {
  try {
    return find_share_file("datasets/" + name + ".yaml");
  } catch (const RuntimeError& error) {
    throw DataError(fmt::format("data={}: the built-in dataset YAML {}", name, error.what()));
  }
}

std::vector<fs::path> read_sources(const YAML::Node& node, const std::string& key, const fs::path& root,
                                   const fs::path& yaml_file) {
  std::vector<fs::path> sources;
  if (!node || node.IsNull()) return sources;
  const auto resolve = [&](const std::string& text) {
    const fs::path path(text);
    return path.is_absolute() ? path : root / path;
  };
  if (node.IsScalar()) {
    sources.push_back(resolve(node.Scalar()));
  } else if (node.IsSequence()) {
    for (const auto& item : node) {
      if (!item.IsScalar()) throw DataError(fmt::format("{}: '{}' must list paths (strings)", yaml_file.string(), key));
      sources.push_back(resolve(item.Scalar()));
    }
  } else {
    throw DataError(fmt::format("{}: '{}' must be a path or a list of paths", yaml_file.string(), key));
  }
  return sources;
}

std::vector<std::string> read_names(const YAML::Node& node, const fs::path& yaml_file) {
  if (!node) return {};
  if (node.IsNull()) throw DataError(fmt::format("{}: key 'names' is missing; list the class names (names: [cat, dog])", yaml_file.string()));
  std::vector<std::string> names;
  if (node.IsSequence()) {
    for (const auto& item : node) names.push_back(item.as<std::string>());
  } else if (node.IsMap()) {
    std::map<long, std::string> by_id;
    for (const auto& item : node) {
      long id = -1;
      try {
        id = item.first.as<long>();
      } catch (const YAML::Exception&) {
        throw DataError(fmt::format("{}: 'names' keys must be class ids 0, 1, ...; got '{}'", yaml_file.string(),
                                    item.first.as<std::string>()));
      }
      by_id[id] = item.second.as<std::string>();
    }
    long expected = 0;
    for (const auto& [id, name] : by_id) {
      if (id != expected) {
        throw DataError(fmt::format("{}: 'names' must number the classes 0..{} without gaps; class {} is missing",
                                    yaml_file.string(), by_id.size() - 1, expected));
      }
      names.push_back(name);
      ++expected;
    }
  } else {
    throw DataError(fmt::format("{}: 'names' must be a list or a mapping of class id to name", yaml_file.string()));
  }
  if (names.empty()) throw DataError(fmt::format("{}: 'names' is empty", yaml_file.string()));
  if (names.size() > static_cast<std::size_t>(kMaxClasses)) {
    throw DataError(fmt::format("{}: 'names' lists {} classes, more than the {} libreyolo trains", yaml_file.string(), names.size(), kMaxClasses));
  }
  return names;
}

// The COCO JSON splits of a YAML: LibreYOLO's `annotations:` mapping (the split's own key is its
// image folder), or a split whose one source is a .json (its image folder found beside it).
void resolve_coco_splits(DatasetSpec& spec, const YAML::Node& annotations) {
  if (annotations && !annotations.IsNull()) {
    if (!annotations.IsMap()) {
      throw DataError(fmt::format("{}: 'annotations' maps splits to COCO JSON files, for example annotations: {{train: "
                                  "annotations/instances_train.json, val: annotations/instances_val.json}}",
                                  spec.yaml_file.string()));
    }
    for (const auto& item : annotations) {
      const std::string split = item.first.as<std::string>();
      if (split != "train" && split != "val" && split != "test") {
        throw DataError(fmt::format("{}: 'annotations' has the split '{}'; use train, val or test", spec.yaml_file.string(), split));
      }
      const fs::path path(item.second.as<std::string>());
      spec.annotations[split] = path.is_absolute() ? path : spec.root / path;
    }
  }
  for (const std::string split : {"train", "val", "test"}) {
    auto& sources = split == "train" ? spec.train : split == "val" ? spec.val : spec.test;
    if (!spec.annotations.count(split)) {
      if (sources.size() != 1 || !is_json_file(sources[0])) continue;
      spec.annotations[split] = sources[0];
      sources.clear();
    }
    if (sources.size() > 1) {
      throw DataError(fmt::format("{}: the '{}' split reads a COCO JSON, whose images lie in one folder; give one folder",
                                  spec.yaml_file.string(), split));
    }
    if (sources.empty()) sources.push_back(find_coco_image_folder(spec.root, split, spec.annotations[split]));
  }
}

// COCO JSON classes: the YAML's names matched by name to the JSON's categories (LibreYOLO), or
// without names, the categories in ascending id order.
void resolve_coco_classes(DatasetSpec& spec) {
  const fs::path& source = spec.annotations.count("val") ? spec.annotations.at("val") : spec.annotations.begin()->second;
  const auto categories = read_coco_categories(source);
  if (spec.names.empty()) {
    if (categories.size() > static_cast<std::size_t>(kMaxClasses)) {
      throw DataError(fmt::format("{}: 'categories' lists {} classes, more than the {} libreyolo trains", source.string(),
                                  categories.size(), kMaxClasses));
    }
    for (const auto& category : categories) {
      spec.names.push_back(category.name);
      spec.category_ids.push_back(category.id);
    }
    return;
  }
  spec.category_ids.assign(spec.names.size(), -1);
  for (const auto& category : categories) {
    const auto it = std::find(spec.names.begin(), spec.names.end(), category.name);
    if (it == spec.names.end()) {
      throw DataError(fmt::format("{}: category '{}' (id {}) of {} is not in 'names'; add it, or leave 'names' out to take "
                                  "the JSON's categories", spec.yaml_file.string(), category.name, category.id,
                                  source.string()));
    }
    spec.category_ids[static_cast<std::size_t>(it - spec.names.begin())] = category.id;
  }
}

fs::path resolve_root(const YAML::Node& node, const fs::path& yaml_file, bool builtin) {
  if (!node || node.IsNull()) return yaml_file.parent_path().lexically_normal();
  const fs::path path(node.as<std::string>());
  if (path.is_absolute()) return path;
  if (builtin) return datasets_dir() / path;
  for (const auto& base : {yaml_file.parent_path(), fs::current_path(), datasets_dir()}) {
    if (present(base / path)) return (base / path).lexically_normal();
  }
  return (yaml_file.parent_path() / path).lexically_normal();
}

}  // namespace

const std::vector<fs::path>& DatasetSpec::split(const std::string& name) const {
  if (name == "train") return train;
  if (name == "val") return val;
  if (name == "test") return test;
  throw UsageError(fmt::format("split='{}' is not valid: use train, val or test", name));
}

fs::path datasets_dir() {
  const char* value = std::getenv("LIBREYOLO_DATASETS");
  return value != nullptr && *value != '\0' ? fs::path(value) : fs::current_path() / "datasets";
}

void DatasetSpec::merge_classes() {
  if (label_classes == 0) label_classes = class_count();
  names = {"item"};
  category_ids.clear();  // one class: predictions.json says category 0
}

const fs::path* DatasetSpec::annotation_file(const std::string& split_name) const {
  const auto it = annotations.find(split_name);
  return it == annotations.end() ? nullptr : &it->second;
}

std::int64_t DatasetSpec::category_id(int cls) const {
  const auto index = static_cast<std::size_t>(cls);
  return index < category_ids.size() && category_ids[index] >= 0 ? category_ids[index] : cls;
}

namespace {

// data=instances_val2017.json: the JSON serves both splits, its images found beside it.
DatasetSpec coco_json_spec(const fs::path& json) {
  DatasetSpec spec;
  spec.yaml_file = json;
  spec.root = json.parent_path().lexically_normal();
  if (spec.root.filename() == "annotations") spec.root = spec.root.parent_path();
  if (spec.root.empty()) spec.root = ".";
  for (const std::string split : {"train", "val"}) spec.annotations[split] = json;
  const fs::path folder = find_coco_image_folder(spec.root, "val", json);
  spec.train = spec.val = {folder};
  resolve_coco_classes(spec);
  return spec;
}

}  // namespace

DatasetSpec load_dataset_spec(const std::string& data) {
  if (is_json_file(data) && present(data)) return coco_json_spec(data);
  DatasetSpec spec;
  std::string name = data;
  if (name.ends_with(".yaml") && !present(name)) name = name.substr(0, name.size() - 5);
  const bool builtin = std::find(kBuiltins.begin(), kBuiltins.end(), lower(name)) != kBuiltins.end() &&
                       !present(data);
  if (builtin) {
    spec.builtin_name = lower(name);
    spec.yaml_file = find_builtin_yaml(spec.builtin_name);
  } else {
    spec.yaml_file = data;
    if (std::error_code error; fs::is_directory(spec.yaml_file, error)) {
      std::vector<std::string> yamls;
      for (const auto& entry : fs::directory_iterator(spec.yaml_file, error)) {
        const std::string extension = lower(entry.path().extension().string());
        if (extension == ".yaml" || extension == ".yml") yamls.push_back(entry.path().string());
      }
      std::sort(yamls.begin(), yamls.end());
      throw DataError(yamls.empty()
          ? fmt::format("data={} is a folder without a dataset YAML: write one there (path:, train:, val:, names:) and "
                        "give its path", data)
          : fmt::format("data={} is a folder: give its dataset YAML, e.g. data={}", data, yamls.front()));
    }
    if (std::error_code error; !fs::is_regular_file(spec.yaml_file, error)) {
      throw DataError(fmt::format("data={}: no such file; give a dataset YAML, a COCO instances_*.json or a built-in "
                                  "name (coco8, coco128, coco)", data));
    }
  }

  YAML::Node root;
  try {
    root = YAML::LoadFile(spec.yaml_file.string());
  } catch (const YAML::Exception& error) {
    throw DataError(fmt::format("{}: not valid YAML (line {}): {}", spec.yaml_file.string(), error.mark.line + 1, error.msg));
  }
  if (!root.IsMap()) throw DataError(fmt::format("{}: a dataset YAML must be a mapping (path:, train:, val:, names:)", spec.yaml_file.string()));

  int nc_only = 0;  // nc given without names
  try {
    spec.root = resolve_root(root["path"], spec.yaml_file, builtin);
    spec.train = read_sources(root["train"], "train", spec.root, spec.yaml_file);
    spec.val = read_sources(root["val"], "val", spec.root, spec.yaml_file);
    spec.test = read_sources(root["test"], "test", spec.root, spec.yaml_file);
    spec.names = read_names(root["names"], spec.yaml_file);
    if (root["download"] && root["download"].IsScalar()) spec.download = root["download"].Scalar();
    if (root["nc"] && !root["names"]) {
      nc_only = root["nc"].as<int>();
      if (nc_only < 1 || nc_only > kMaxClasses) {
        throw DataError(fmt::format("{}: nc={} must be from 1 to {}; or list the class names (names: [cat, dog])",
                                    spec.yaml_file.string(), nc_only, kMaxClasses));
      }
    } else if (root["nc"] && !spec.names.empty()) {
      const int nc = root["nc"].as<int>();
      if (nc != spec.class_count()) {
        throw DataError(fmt::format("{}: nc={} but 'names' has {} entries; make them agree", spec.yaml_file.string(), nc,
                                    spec.class_count()));
      }
    }
  } catch (const YAML::Exception& error) {
    throw DataError(fmt::format("{}: {} (line {})", spec.yaml_file.string(), error.msg, error.mark.line + 1));
  }
  try {
    resolve_coco_splits(spec, root["annotations"]);
  } catch (const YAML::Exception& error) {
    throw DataError(fmt::format("{}: 'annotations': {} (line {})", spec.yaml_file.string(), error.msg, error.mark.line + 1));
  }
  if (!spec.annotations.empty()) resolve_coco_classes(spec);
  // nc without names (nor COCO categories): class_0, class_1, ... as LibreYOLO and Ultralytics name them
  if (spec.names.empty()) {
    for (int i = 0; i < nc_only; ++i) spec.names.push_back(fmt::format("class_{}", i));
  }
  if (spec.names.empty()) {
    throw DataError(fmt::format("{}: key 'names' is missing; list the class names (names: [cat, dog]) or give their count (nc: 2)", spec.yaml_file.string()));
  }
  if (spec.train.empty() && spec.val.empty()) {
    throw DataError(fmt::format("{}: key 'train' (and 'val') missing; give the image folders or lists", spec.yaml_file.string()));
  }

  if (builtin && !present(spec.root)) {
    throw DataError(fmt::format("dataset {} not found at {}: download {} and unzip it there (or set LIBREYOLO_DATASETS "
                                "to the folder that holds {})",
                                spec.builtin_name, spec.root.string(), spec.download, spec.builtin_name));
  }
  return spec;
}

bool is_json_file(const fs::path& path) { return lower(path.extension().string()) == ".json"; }

bool has_image_extension(const fs::path& path) {
  static constexpr std::array<std::string_view, 11> kExtensions{".bmp", ".dng", ".jpeg", ".jpg", ".mpo", ".png",
                                                                ".tif", ".tiff", ".webp", ".pfm", ".heic"};
  const std::string extension = lower(path.extension().string());
  return std::find(kExtensions.begin(), kExtensions.end(), extension) != kExtensions.end();
}

namespace {

// Every image under `folder`, following symbolic links to folders once each (by device and inode)
// so that a link back up the tree is listed once, not until the path overflows. Entries that cannot
// be read (a link to itself, a dangling link, a folder without permission) are skipped with a warning.
void find_images(const fs::path& folder, std::vector<fs::path>& found) {
  std::vector<fs::path> pending{folder};
  std::set<std::pair<std::uint64_t, std::uint64_t>> listed;
  while (!pending.empty()) {
    const fs::path current = std::move(pending.back());
    pending.pop_back();
    struct stat info {};
    if (::stat(current.c_str(), &info) != 0) continue;  // warned about as an entry already
    if (!listed.emplace(info.st_dev, info.st_ino).second) {
      log::warn("{}: a symbolic link to a folder that is already listed (a loop); skipped", current.string());
      continue;
    }
    std::error_code error;
    for (fs::directory_iterator it(current, error), end; !error && it != end; it.increment(error)) {
      const fs::path& path = it->path();
      std::error_code status_error;
      const fs::file_status status = fs::status(path, status_error);  // through symbolic links
      if (status_error) {
        log::warn("{}: {}; skipped", path.string(), status_error.message());
      } else if (fs::is_directory(status)) {
        pending.push_back(path);
      } else if (fs::is_regular_file(status) && has_image_extension(path)) {
        found.push_back(path);
      }
    }
    if (error) log::warn("cannot list {}: {}; skipped", current.string(), error.message());
  }
}

}  // namespace

std::vector<fs::path> list_images(const std::vector<fs::path>& sources, const std::string& split) {
  std::vector<fs::path> images;
  for (const auto& source : sources) {
    std::vector<fs::path> found;
    std::error_code error;
    const fs::file_status status = fs::status(source, error);
    if (error && error != std::errc::no_such_file_or_directory) {
      throw DataError(fmt::format("'{}' source {}: {}", split, source.string(), error.message()));
    }
    if (fs::is_directory(status)) {
      find_images(source, found);
      std::sort(found.begin(), found.end());
    } else if (fs::is_regular_file(status) && lower(source.extension().string()) == ".txt") {
      std::ifstream list(source);
      for (std::string line; std::getline(list, line);) {
        while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
        if (line.empty()) continue;
        fs::path path(line);
        if (!path.is_absolute()) path = source.parent_path() / path;
        found.push_back(path.lexically_normal());
      }
    } else if (fs::is_regular_file(status) && has_image_extension(source)) {
      found.push_back(source);
    } else {
      throw DataError(fmt::format("'{}' source {} does not exist (or is not an image folder, .txt list or image)", split,
                                  source.string()));
    }
    images.insert(images.end(), found.begin(), found.end());
  }
  return images;
}

}  // namespace libreyolo::data
