// YOLO label files: the /images/ -> /labels/ mapping, row parsing (5-column boxes and polygon
// rows turned into boxes) and the checks that decide whether a label file is corrupt.
#pragma once

#include <filesystem>
#include <stdexcept>
#include <vector>

namespace libreyolo::data {

struct Box {
  int cls = 0;
  float cx = 0, cy = 0, w = 0, h = 0;  // normalised to the (upright) image, in [0, 1]
  bool operator==(const Box&) const = default;
};

class CorruptLabel : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// .../images/.../x.jpg -> .../labels/.../x.txt (the last /images/ is replaced, as Ultralytics does).
std::filesystem::path label_path_for(const std::filesystem::path& image);

struct ParsedLabels {
  std::vector<Box> boxes;
  int duplicates_removed = 0;
};

// Parses one label file for a dataset of `class_count` classes. Throws CorruptLabel with the
// reason. Coordinates within 1e-3 outside [0, 1] are clipped; further out is corrupt.
ParsedLabels parse_label_text(const std::string& text, int class_count);
ParsedLabels read_label_file(const std::filesystem::path& path, int class_count);

}  // namespace libreyolo::data
