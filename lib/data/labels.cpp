#include "data/labels.h"

#include "core/printable.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

namespace libreyolo::data {

namespace fs = std::filesystem;

namespace {

constexpr double kTolerance = 1e-3;

std::vector<double> parse_numbers(const std::string& line, int line_number) {
  std::vector<double> values;
  std::istringstream stream(line);
  for (std::string field; stream >> field;) {
    char* end = nullptr;
    const double value = std::strtod(field.c_str(), &end);
    if (end == field.c_str() || *end != '\0') {
      throw CorruptLabel(fmt::format("line {}: '{}' is not a number", line_number, printable(field)));
    }
    if (!std::isfinite(value)) throw CorruptLabel(fmt::format("line {}: non-finite label value '{}'", line_number, printable(field)));
    values.push_back(value);
  }
  return values;
}

double checked_coordinate(double value, int line_number) {
  if (value < -kTolerance) throw CorruptLabel(fmt::format("line {}: negative label values", line_number));
  if (value > 1 + kTolerance) {
    throw CorruptLabel(fmt::format("line {}: non-normalized or out of bounds coordinates ({} > 1)", line_number, value));
  }
  return std::clamp(value, 0.0, 1.0);
}

Box box_from_row(const std::vector<double>& row, int class_count, int line_number) {
  const double cls = row[0];
  if (cls != std::floor(cls)) throw CorruptLabel(fmt::format("line {}: class '{}' is not an integer", line_number, cls));
  if (cls < 0) throw CorruptLabel(fmt::format("line {}: negative class {}", line_number, cls));
  if (cls >= class_count) {
    throw CorruptLabel(fmt::format("line {}: label class {} exceeds dataset class count {}; possible class labels are "
                                   "0-{}",
                                   line_number, fmt::format("{:.0f}", cls), class_count, class_count - 1));
  }
  Box box;
  box.cls = static_cast<int>(cls);
  if (row.size() == 5) {
    box.cx = static_cast<float>(checked_coordinate(row[1], line_number));
    box.cy = static_cast<float>(checked_coordinate(row[2], line_number));
    box.w = static_cast<float>(checked_coordinate(row[3], line_number));
    box.h = static_cast<float>(checked_coordinate(row[4], line_number));
  } else {
    // polygon: class x1 y1 x2 y2 ... -> its bounding box
    double x_min = 1, y_min = 1, x_max = 0, y_max = 0;
    for (std::size_t i = 1; i + 1 < row.size(); i += 2) {
      const double x = checked_coordinate(row[i], line_number);
      const double y = checked_coordinate(row[i + 1], line_number);
      x_min = std::min(x_min, x);
      x_max = std::max(x_max, x);
      y_min = std::min(y_min, y);
      y_max = std::max(y_max, y);
    }
    box.cx = static_cast<float>((x_min + x_max) / 2);
    box.cy = static_cast<float>((y_min + y_max) / 2);
    box.w = static_cast<float>(x_max - x_min);
    box.h = static_cast<float>(y_max - y_min);
  }
  // a box of zero width or height is kept, as Ultralytics and LibreYOLO keep it (only values below 0
  // or above 1 make a label corrupt): the image stays in the split, validation leaves the box out of
  // its ground truth (Validator), and every training pipeline drops boxes under 1-2 px
  return box;
}

}  // namespace

fs::path label_path_for(const fs::path& image) {
  const std::string text = image.string();
  const std::string images_dir = "/images/";
  const auto at = text.rfind(images_dir);
  fs::path label = at == std::string::npos
                       ? image
                       : fs::path(text.substr(0, at) + "/labels/" + text.substr(at + images_dir.size()));
  return label.replace_extension(".txt");
}

ParsedLabels parse_label_text(const std::string& text, int class_count) {
  ParsedLabels parsed;
  std::istringstream stream(text);
  int line_number = 0;
  for (std::string line; std::getline(stream, line);) {
    ++line_number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const auto row = parse_numbers(line, line_number);
    const bool polygon = row.size() >= 7 && row.size() % 2 == 1;
    if (row.size() != 5 && !polygon) {
      throw CorruptLabel(fmt::format("line {}: labels require 5 columns (or a polygon), {} columns detected",
                                     line_number, row.size()));
    }
    const Box box = box_from_row(row, class_count, line_number);
    if (std::find(parsed.boxes.begin(), parsed.boxes.end(), box) != parsed.boxes.end()) {
      ++parsed.duplicates_removed;
      continue;
    }
    parsed.boxes.push_back(box);
  }
  return parsed;
}

ParsedLabels read_label_file(const fs::path& path, int class_count) {
  std::ifstream stream(path, std::ios::binary);
  if (!stream) throw CorruptLabel(fmt::format("cannot read {}", path.string()));
  std::stringstream buffer;
  buffer << stream.rdbuf();
  return parse_label_text(buffer.str(), class_count);
}

}  // namespace libreyolo::data
