// What a family's loss returns: the total that carries the gradient, and the named parts for
// logging (detached, gains included), in the family's order.
#pragma once

#include <ATen/Tensor.h>

#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace libreyolo::models {

// A loss normaliser (the foreground count or score sum) in data-parallel training: the whole
// global batch's, clamped to 1 as one process clamps it, divided by the world size. Each rank's
// loss is then its share of the single-process loss, and the averaged gradients equal one
// process's over the same samples. Empty in a single process.
using GlobalNormaliser = std::function<at::Tensor(const at::Tensor& local)>;

// A per-rank count's global-batch sum divided by the world size, unclamped (a normaliser's raw
// form: D-FINE's distillation weighs matched and unmatched edges by their global counts). Empty in
// a single process.
using GlobalShare = std::function<at::Tensor(const at::Tensor& local)>;

inline at::Tensor loss_normaliser(const at::Tensor& local, const GlobalNormaliser& global) {
  return global ? global(local) : local.clamp_min(1.0);
}

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
