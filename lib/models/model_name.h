// Model names users type: `yolo9-t`, `yolox-s`, `rtdetr-r18`, LibreYOLO weight names (`LibreYOLO9t.pt`,
// `LibreYOLOXs.pt`, `LibreRTDETRr18.pt`) and checkpoint paths. Tells family and size without loading anything.
#pragma once

#include <optional>
#include <string>
#include <vector>
#include <string_view>

namespace libreyolo::models {

struct ModelName {
  std::string family;  // "yolo9", "yolox" or "rtdetr"; empty for a checkpoint whose name does not say
  std::string size;    // "t", "s", "r18", ...; empty when family is empty
  bool is_file = false;  // a weights file (.pt / .safetensors) rather than a from-scratch build
  std::string weights_name() const;  // LibreYOLO's file name for family+size, e.g. LibreYOLO9t.pt
};

// Throws ModelError for a name that is neither a known family-size nor a weights file.
ModelName parse_model_name(std::string_view name);
// The registered names, for help and errors: "yolo9-t/s/m/c, yolox-n/t/s/m/l/x, ...".
std::string model_names();

}  // namespace libreyolo::models
