#include "data/image_folder.h"

#include "core/error.h"
#include "core/text.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <string_view>
#include <iterator>
#include <map>
#include <system_error>
#include <utility>

namespace libreyolo::data {

namespace fs = std::filesystem;

namespace {

constexpr std::array<std::string_view, 9> kExtensions{".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp"};

constexpr std::string_view kLayout = "an ImageFolder dataset holds root/train/<class>/ and root/val/<class>/ folders of images";

std::vector<std::string> folders_in(const fs::path& folder) {
  std::vector<std::string> names;
  std::error_code error;
  for (fs::directory_iterator it(folder, fs::directory_options::follow_directory_symlink, error), end; !error && it != end;
       it.increment(error)) {
    if (it->is_directory(error)) names.push_back(it->path().filename().string());
  }
  if (error) throw DataError(fmt::format("{}: cannot be listed ({})", folder.string(), error.message()));
  std::sort(names.begin(), names.end());  // byte order, as Python's sorted()
  return names;
}

// The images under a class folder in torchvision's order: sorted(os.walk(folder, followlinks=True))
// visits the folders by path, each folder's files sorted by name.
std::vector<fs::path> class_images(const fs::path& folder) {
  std::vector<std::pair<std::string, std::string>> found;  // (folder, file name)
  std::error_code error;
  for (fs::recursive_directory_iterator it(folder, fs::directory_options::follow_directory_symlink, error), end;
       !error && it != end; it.increment(error)) {
    if (it->is_directory(error)) {
      if (it.depth() >= 16) it.disable_recursion_pending();  // a link back up the tree ends here
      continue;
    }
    if (it->is_regular_file(error) && is_image_folder_file(it->path())) {
      found.emplace_back(it->path().parent_path().string(), it->path().filename().string());
    }
  }
  if (error) throw DataError(fmt::format("{}: cannot be listed ({})", folder.string(), error.message()));
  std::sort(found.begin(), found.end());
  std::vector<fs::path> paths;
  paths.reserve(found.size());
  for (const auto& [parent, name] : found) paths.push_back(fs::path(parent) / name);
  return paths;
}

}  // namespace

std::vector<std::size_t> ImageFolderSplit::per_class() const {
  std::vector<std::size_t> counts(classes.size(), 0);
  for (const auto& image : images) ++counts[static_cast<std::size_t>(image.label)];
  return counts;
}

bool is_image_folder_file(const fs::path& path) {
  const std::string extension = ascii_lower(path.extension().string());
  return std::find(kExtensions.begin(), kExtensions.end(), extension) != kExtensions.end();
}

std::vector<std::string> image_folder_classes(const fs::path& root) {
  const fs::path train = root / "train";
  std::error_code error;
  if (!fs::is_directory(train, error)) {
    throw DataError(fmt::format("{}: no such folder; {}", train.string(), kLayout));
  }
  auto classes = folders_in(train);
  if (classes.empty()) throw DataError(fmt::format("{}: no class folder in it; {}", train.string(), kLayout));
  return classes;
}

ImageFolderSplit scan_image_folder(const fs::path& root, const std::string& split, const std::vector<std::string>& classes) {
  ImageFolderSplit out{.split = split, .folder = root / split, .classes = classes, .images = {}};
  std::error_code error;
  if (!fs::is_directory(out.folder, error)) {
    throw DataError(fmt::format("{}: no such folder; {}", out.folder.string(), kLayout));
  }
  const auto present = folders_in(out.folder);
  std::vector<std::string> extra, missing;
  std::set_difference(present.begin(), present.end(), classes.begin(), classes.end(), std::back_inserter(extra));
  std::set_difference(classes.begin(), classes.end(), present.begin(), present.end(), std::back_inserter(missing));
  if (!extra.empty()) {
    throw DataError(fmt::format("{}: class folder(s) {} that {}/train lacks; the classes are train's folders, so give "
                                "every split the same class folders", out.folder.string(), fmt::join(extra, ", "), root.string()));
  }
  if (!missing.empty()) {
    throw DataError(fmt::format("{}: lacks the class folder(s) {} that {}/train has; give every split the same class folders",
                                out.folder.string(), fmt::join(missing, ", "), root.string()));
  }
  for (std::size_t label = 0; label < classes.size(); ++label) {
    const fs::path folder = out.folder / classes[label];
    const auto paths = class_images(folder);
    if (paths.empty()) {
      throw DataError(fmt::format("{}: no image in it (.jpg .jpeg .png .ppm .bmp .pgm .tif .tiff .webp); add images or "
                                  "remove the class from every split", folder.string()));
    }
    for (const auto& path : paths) out.images.push_back({path, static_cast<int>(label)});
  }
  return out;
}

bool is_image_folder_root(const fs::path& data) {
  std::error_code error;
  const fs::path train = data / "train";
  if (!fs::is_directory(train, error) || fs::exists(data / "labels", error) || fs::exists(train / "labels", error)) return false;
  for (fs::directory_iterator it(train, error), end; !error && it != end; it.increment(error)) {
    if (it->is_directory(error)) return true;
  }
  return false;
}

DatasetSpec image_folder_spec(const std::string& data) {
  DatasetSpec spec;
  const fs::path given(data);
  std::error_code error;
  std::vector<std::string> listed_names;
  std::map<std::string, std::string> folders{{"train", "train"}, {"val", "val"}, {"test", "test"}};
  const std::string extension = ascii_lower(given.extension().string());
  if (extension == ".yaml" || extension == ".yml") {
    if (!fs::is_regular_file(given, error)) throw DataError(fmt::format("data={}: no such file", data));
    YAML::Node node;
    try {
      node = YAML::LoadFile(given.string());
    } catch (const YAML::Exception& e) {
      throw DataError(fmt::format("{}: not valid YAML ({})", data, e.what()));
    }
    spec.yaml_file = given;
    const fs::path base = given.parent_path();
    spec.root = node["path"] && node["path"].IsScalar() ? fs::path(node["path"].as<std::string>()) : base;
    if (spec.root.is_relative()) spec.root = base / spec.root;
    for (auto& [split, folder] : folders) {
      if (!node[split]) continue;
      if (!node[split].IsScalar()) {
        throw DataError(fmt::format("{}: '{}' of a classification dataset is one folder under 'path' (its ImageFolder split)", data, split));
      }
      folder = node[split].as<std::string>();
      if (fs::path(folder).has_parent_path()) {
        throw DataError(fmt::format("{}: {}: {} is not a folder directly under {}; {}", data, split, folder, spec.root.string(), kLayout));
      }
    }
    if (const YAML::Node names = node["names"]) {
      if (names.IsSequence()) {
        for (const auto& name : names) listed_names.push_back(name.as<std::string>());
      } else if (names.IsMap()) {
        std::map<int, std::string> by_index;
        for (const auto& item : names) by_index[item.first.as<int>()] = item.second.as<std::string>();
        for (const auto& [index, name] : by_index) listed_names.push_back(name);
      }
    }
  } else {
    if (!fs::is_directory(given, error)) {
      throw DataError(fmt::format("data={}: no such folder; a classification dataset is an ImageFolder root (root/train/<class>/, "
                                  "root/val/<class>/) or a YAML naming one", data));
    }
    const std::string leaf = given.filename().empty() ? given.parent_path().filename().string() : given.filename().string();
    const fs::path parent = given.filename().empty() ? given.parent_path().parent_path() : given.parent_path();
    const bool is_split = (leaf == "train" || leaf == "val" || leaf == "test") && fs::is_directory(parent / "train", error);
    spec.root = is_split && !fs::is_directory(given / "train", error) ? parent : given;
    spec.yaml_file = spec.root;
  }
  if (folders.at("train") != "train") {
    throw DataError(fmt::format("{}: train: {}: the classes are read from the folder 'train' under {}; rename it", data,
                                folders.at("train"), spec.root.string()));
  }
  spec.names = image_folder_classes(spec.root);
  if (!listed_names.empty() && listed_names != spec.names) {
    throw DataError(fmt::format("{}: names [{}] are not the class folders of {}/train in sorted order [{}]; leave names out or "
                                "list the folders", data, fmt::join(listed_names, ", "), spec.root.string(), fmt::join(spec.names, ", ")));
  }
  spec.train = {spec.root / "train"};
  for (const auto& [split, list] : {std::pair{"val", &spec.val}, std::pair{"test", &spec.test}}) {
    const fs::path folder = spec.root / folders.at(split);
    if (fs::is_directory(folder, error)) *list = {folder};
  }
  return spec;
}

}  // namespace libreyolo::data
