#include "data/coco_json.h"

#include "core/error.h"
#include "core/printable.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <unordered_map>

namespace libreyolo::data {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The whole file, or with `keep_only` the top-level key of that name alone (the others are
// dropped while parsing: a COCO train JSON holds hundreds of MB of annotations).
json parse_json_file(const fs::path& path, const char* keep_only = nullptr) {
  std::ifstream stream(path, std::ios::binary);
  if (!stream) throw DataError(fmt::format("{}: cannot be read; check that the COCO annotation file exists", path.string()));
  const json::parser_callback_t keep = [keep_only](int depth, json::parse_event_t event, json& parsed) {
    return keep_only == nullptr || depth != 1 || event != json::parse_event_t::key || parsed == keep_only;
  };
  try {
    json document = json::parse(stream, keep);
    if (!document.is_object()) {
      throw DataError(fmt::format("{}: a COCO annotation file is a JSON object with 'images', 'annotations' and "
                                  "'categories'", path.string()));
    }
    return document;
  } catch (const json::parse_error& error) {
    throw DataError(fmt::format("{}: not valid JSON (at byte {}): {}; fix or re-export the file", path.string(), error.byte,
                                printable(error.what(), 200)));
  } catch (const json::exception& error) {  // a number beyond double's range, ...
    throw DataError(fmt::format("{}: not readable as JSON: {}; fix or re-export the file", path.string(),
                                printable(error.what(), 200)));
  }
}

// `entry[key]` as the type a COCO file must give it, or a DataError naming file, list, index and key.
struct EntryReader {
  const fs::path& file;
  const char* list;
  std::size_t index;
  const json& entry;

  [[noreturn]] void fail(const char* key, const char* wanted) const {
    throw DataError(fmt::format("{}: {}[{}]: '{}' must be {}; fix the file or re-export it", file.string(), list, index,
                                key, wanted));
  }
  std::int64_t integer(const char* key) const {
    const auto it = entry.find(key);
    if (it == entry.end() || !it->is_number_integer()) fail(key, "an integer");
    return it->get<std::int64_t>();
  }
  double number(const char* key, double fallback) const {
    const auto it = entry.find(key);
    if (it == entry.end()) return fallback;
    if (!it->is_number()) fail(key, "a number");
    return it->get<double>();
  }
  std::string text(const char* key) const {
    const auto it = entry.find(key);
    if (it == entry.end() || !it->is_string() || it->get_ref<const std::string&>().empty()) fail(key, "a file name");
    return it->get<std::string>();
  }
};

const json& list_of(const json& document, const fs::path& file, const char* key, bool required) {
  static const json empty = json::array();
  const auto it = document.find(key);
  if (it == document.end()) {
    if (!required) return empty;
    throw DataError(fmt::format("{}: the key '{}' is missing; a COCO annotation file lists 'images', 'annotations' and "
                                "'categories'", file.string(), key));
  }
  if (!it->is_array()) throw DataError(fmt::format("{}: '{}' must be a list", file.string(), key));
  return *it;
}

// One annotation: its box for training (left out when crowd or empty; clipped to the image) and
// for validation (as written).
void add_annotation(ImageRecord& record, int cls, const std::array<double, 4>& bbox, double area, bool crowd) {
  record.annotations.push_back({cls, static_cast<float>(bbox[0]), static_cast<float>(bbox[1]), static_cast<float>(bbox[2]),
                                static_cast<float>(bbox[3]), static_cast<float>(area), crowd});
  if (crowd || area <= 0) return;
  const double x1 = std::max(0.0, bbox[0]), y1 = std::max(0.0, bbox[1]);
  const double x2 = std::min<double>(record.width, bbox[0] + std::max(0.0, bbox[2]));
  const double y2 = std::min<double>(record.height, bbox[1] + std::max(0.0, bbox[3]));
  if (x2 <= x1 || y2 <= y1) return;
  record.boxes.push_back({cls, static_cast<float>((x1 + x2) / 2 / record.width), static_cast<float>((y1 + y2) / 2 / record.height),
                          static_cast<float>((x2 - x1) / record.width), static_cast<float>((y2 - y1) / record.height)});
}

// "id 12 (-5x3)": an annotation as a warning names it (its list index when it has no integer id).
std::string annotation_name(const json& annotation, std::size_t index, const std::array<double, 4>& bbox) {
  const auto id = annotation.find("id");
  const std::string name = id != annotation.end() && id->is_number_integer() ? fmt::format("id {}", id->get<std::int64_t>())
                                                                           : fmt::format("annotations[{}]", index);
  return fmt::format("{} ({:g}x{:g})", name, bbox[2], bbox[3]);
}

std::string first_few(const std::vector<std::string>& names) {
  const std::size_t shown = std::min<std::size_t>(names.size(), 5);
  return fmt::format("{}{}", fmt::join(names.begin(), names.begin() + static_cast<std::ptrdiff_t>(shown), ", "),
                     names.size() > shown ? ", ..." : "");
}

}  // namespace

std::vector<CocoCategory> read_coco_categories(const fs::path& file) {
  const json document = parse_json_file(file, "categories");
  const json& list = list_of(document, file, "categories", true);
  std::vector<CocoCategory> categories;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const EntryReader entry{file, "categories", i, list[i]};
    if (!list[i].is_object()) entry.fail("(the entry)", "an object with id and name");
    categories.push_back({entry.integer("id"), entry.text("name")});
  }
  std::sort(categories.begin(), categories.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  for (std::size_t i = 1; i < categories.size(); ++i) {
    if (categories[i].id == categories[i - 1].id) {
      throw DataError(fmt::format("{}: category id {} is listed twice; give each category its own id", file.string(),
                                  categories[i].id));
    }
  }
  if (categories.empty()) throw DataError(fmt::format("{}: 'categories' is empty; list the classes", file.string()));
  return categories;
}

fs::path find_coco_image_folder(const fs::path& root, const std::string& split, const fs::path& json_file) {
  std::string name = json_file.stem().string();
  if (name.starts_with("instances_")) name = name.substr(10);
  std::vector<fs::path> candidates{root / "images" / name, root / name, root / "images" / split, root / split,
                                   root / "images"};
  for (const auto& folder : candidates) {
    if (std::error_code error; fs::is_directory(folder, error)) return folder;
  }
  std::string tried;
  for (const auto& folder : candidates) tried += (tried.empty() ? "" : ", ") + folder.string();
  throw DataError(fmt::format("{}: no image folder found for the '{}' split (looked for {}); name it in the data YAML: "
                              "annotations: {{{}: {}}} with {}: <image folder>",
                              json_file.string(), split, tried, split, json_file.string(), split));
}

ScanResult read_coco_split(const fs::path& file, const fs::path& image_folder, const std::vector<std::int64_t>& category_ids) {
  const json document = parse_json_file(file);
  const json& images = list_of(document, file, "images", true);
  const json& annotations = list_of(document, file, "annotations", false);
  const json& categories = list_of(document, file, "categories", true);
  ScanResult scan;
  scan.cache_file = file;
  scan.coco = CocoCounts{static_cast<std::int64_t>(images.size()), static_cast<std::int64_t>(annotations.size()), 0,
                         static_cast<std::int64_t>(categories.size())};
  std::unordered_map<std::int64_t, int> class_of;
  for (std::size_t c = 0; c < category_ids.size(); ++c) class_of[category_ids[c]] = static_cast<int>(c);

  std::vector<ImageRecord> records;
  std::unordered_map<std::int64_t, std::size_t> record_of;
  for (std::size_t i = 0; i < images.size(); ++i) {
    const EntryReader entry{file, "images", i, images[i]};
    if (!images[i].is_object()) entry.fail("(the entry)", "an object with id, file_name, width and height");
    ImageRecord record;
    record.source_id = entry.integer("id");
    const fs::path name(entry.text("file_name"));
    record.image = (name.is_absolute() ? name : image_folder / name).lexically_normal();
    const std::int64_t width = entry.integer("width"), height = entry.integer("height");
    if (width <= 0 || height <= 0 || width > 1'000'000 || height > 1'000'000) entry.fail("width", "a positive image size");
    record.width = static_cast<int>(width);
    record.height = static_cast<int>(height);
    if (!record_of.emplace(record.source_id, records.size()).second) {
      throw DataError(fmt::format("{}: images[{}]: image id {} is listed twice; give each image its own id", file.string(),
                                  i, record.source_id));
    }
    records.push_back(std::move(record));
  }
  std::int64_t orphans = 0;
  std::vector<std::string> negative_boxes, empty_boxes;  // annotations whose box has no extent, named
  for (std::size_t i = 0; i < annotations.size(); ++i) {
    const EntryReader entry{file, "annotations", i, annotations[i]};
    if (!annotations[i].is_object()) entry.fail("(the entry)", "an object with image_id, category_id and bbox");
    const auto where = record_of.find(entry.integer("image_id"));
    const std::int64_t category = entry.integer("category_id");
    const auto cls = class_of.find(category);
    if (cls == class_of.end()) {
      throw DataError(fmt::format("{}: annotations[{}]: category_id {} is not one of the dataset's categories; list it in "
                                  "'categories'", file.string(), i, category));
    }
    const auto bbox_it = annotations[i].find("bbox");
    if (bbox_it == annotations[i].end() || !bbox_it->is_array() || bbox_it->size() != 4 ||
        !std::all_of(bbox_it->begin(), bbox_it->end(), [](const json& v) { return v.is_number(); })) {
      entry.fail("bbox", "[x, y, width, height] in pixels");
    }
    const std::array<double, 4> bbox{(*bbox_it)[0].get<double>(), (*bbox_it)[1].get<double>(), (*bbox_it)[2].get<double>(),
                                     (*bbox_it)[3].get<double>()};
    const bool crowd = entry.number("iscrowd", 0) != 0;
    scan.coco->crowd += crowd ? 1 : 0;
    if (where == record_of.end()) {
      ++orphans;
      continue;
    }
    if (bbox[2] < 0 || bbox[3] < 0) {  // no box at all: left out of training and validation alike
      negative_boxes.push_back(annotation_name(annotations[i], i, bbox));
      continue;
    }
    // no extent: COCOeval counts it as a box nothing can match, so validation keeps it; training cannot
    if (!crowd && (bbox[2] == 0 || bbox[3] == 0)) empty_boxes.push_back(annotation_name(annotations[i], i, bbox));
    // no area: COCOeval would fail; the box's area is the nearest meaning
    add_annotation(records[where->second], cls->second, bbox, entry.number("area", bbox[2] * bbox[3]), crowd);
  }
  if (!negative_boxes.empty()) {
    scan.messages.push_back(fmt::format("{}: {} annotation(s) with a negative bbox width or height ({}); skipped in training "
                                        "and validation: fix their [x, y, width, height]",
                                        file.string(), negative_boxes.size(), first_few(negative_boxes)));
  }
  if (!empty_boxes.empty()) {
    scan.messages.push_back(fmt::format("{}: {} annotation(s) with a bbox width or height of 0 ({}); left out of training, "
                                        "kept in validation as COCOeval counts them (no detection can match them)",
                                        file.string(), empty_boxes.size(), first_few(empty_boxes)));
  }
  if (orphans > 0) {
    scan.messages.push_back(fmt::format("{}: {} annotation(s) name an image id that 'images' does not list; skipped",
                                        file.string(), orphans));
  }
  for (auto& record : records) {
    if (std::error_code error; !fs::is_regular_file(record.image, error)) {
      ++scan.corrupt;
      scan.messages.push_back(fmt::format("{}: image not found (image id {} of {}); skipped", printable(record.image.string(), 200),
                                          record.source_id, file.filename().string()));
      continue;
    }
    scan.backgrounds += record.boxes.empty() ? 1 : 0;
    scan.images.push_back(std::move(record));
  }
  return scan;
}

}  // namespace libreyolo::data
