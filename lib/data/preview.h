// A picture of samples for a person to look at: each image with its boxes and class names,
// tiled into one grid.
#pragma once

#include "data/sample.h"

#include <string>
#include <vector>

namespace libreyolo::data {

cv::Mat draw_sample(const Sample& sample, const std::vector<std::string>& names);
cv::Mat tile_grid(const std::vector<cv::Mat>& images, int cell_size);

}  // namespace libreyolo::data
