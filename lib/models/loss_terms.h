// What a family's loss returns: the total that carries the gradient, and the named parts for
// logging (detached, gains included), in the family's order.
#pragma once

#include <ATen/Tensor.h>

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace libreyolo::models {

struct LossTerms {
  at::Tensor total;
  std::vector<std::pair<std::string, at::Tensor>> parts;

  const at::Tensor& part(const std::string& name) const {
    for (const auto& [key, value] : parts) {
      if (key == name) return value;
    }
    throw std::out_of_range("no loss term named " + name);
  }
};

}  // namespace libreyolo::models
