// LibreYOLO's class_balanced sampling (LVIS repeat factors): with f(c) the fraction of images
// that contain class c and t the median of the non-zero f, a class rarer than t repeats
// r(c) = (t / f(c))^alpha; an image weighs the largest r of its classes, an empty image 1.
#pragma once

#include "data/dataset.h"

#include <vector>

namespace libreyolo::data {

std::vector<double> repeat_factors(const Dataset& dataset, int class_count, double alpha = 0.5);

}  // namespace libreyolo::data
