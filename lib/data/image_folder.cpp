#include "data/image_folder.h"

#include "core/error.h"
#include "core/text.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <string_view>
#include <iterator>
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

}  // namespace libreyolo::data
