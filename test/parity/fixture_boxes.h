// The fixture files the Python oracles write: a JSON list of cases, each with ground truth rows
// [image, class, x, y, w, h] (optionally followed by iscrowd and the annotation's area) and detection rows [image, class, x, y, w, h, score].
#pragma once

#include "eval/coco_eval.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace parity {

inline nlohmann::json read_cases(const std::string& dir, const std::string& file) {
  std::ifstream stream(dir + "/" + file);
  return nlohmann::json::parse(stream);
}

inline std::pair<std::vector<libreyolo::eval::CocoBox>, std::vector<libreyolo::eval::CocoBox>> boxes_of(const nlohmann::json& c) {
  std::vector<libreyolo::eval::CocoBox> gt, dt;
  for (const auto& g : c["gt"]) {
    gt.push_back({g[0].get<std::int64_t>(), g[1].get<int>(), g[2], g[3], g[4], g[5], 1.0});
    if (g.size() > 6) {  // [..., iscrowd, area]
      gt.back().crowd = g[6].get<int>() != 0;
      gt.back().area = g[7];
    }
  }
  for (const auto& d : c["dt"]) dt.push_back({d[0].get<std::int64_t>(), d[1].get<int>(), d[2], d[3], d[4], d[5], d[6]});
  return {std::move(gt), std::move(dt)};
}

}  // namespace parity
