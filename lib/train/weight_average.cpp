#include "train/weight_average.h"

#include "models/checkpoint.h"
#include "models/torch_file.h"

#include <ATen/ATen.h>
#include <ATen/core/Dict.h>
#include <ATen/core/List.h>

#include <algorithm>
#include <cmath>

namespace libreyolo::train {

bool BestAverage::consider(const models::NamedTensors& state, double metric) {
  if (count_ <= 0 || !std::isfinite(metric)) return false;
  models::NamedTensors copy;
  for (const auto& [name, tensor] : state) copy.emplace_back(name, tensor.detach().to(at::kCPU).clone());
  if (static_cast<int>(pool_.size()) < count_) {
    pool_.push_back({metric, std::move(copy)});
    return true;
  }
  const auto worst = std::min_element(pool_.begin(), pool_.end(), [](const Entry& a, const Entry& b) { return a.metric < b.metric; });
  if (metric <= worst->metric) return false;
  *worst = {metric, std::move(copy)};
  return true;
}

std::optional<models::NamedTensors> BestAverage::average() const {
  if (pool_.empty()) return std::nullopt;
  const auto best = std::max_element(pool_.begin(), pool_.end(), [](const Entry& a, const Entry& b) { return a.metric < b.metric; });
  models::NamedTensors out;
  for (std::size_t k = 0; k < pool_.front().state.size(); ++k) {
    const auto& [name, reference] = pool_.front().state[k];
    if (!at::isFloatingType(reference.scalar_type())) {
      out.emplace_back(name, best->state[k].second.clone());  // e.g. num_batches_tracked: the best snapshot's
      continue;
    }
    at::Tensor sum = at::zeros_like(reference, at::kFloat);
    for (const auto& entry : pool_) sum.add_(entry.state[k].second.to(at::kFloat));
    out.emplace_back(name, (sum / static_cast<double>(pool_.size())).to(reference.scalar_type()));
  }
  return out;
}

std::vector<double> BestAverage::metrics() const {
  std::vector<double> out;
  for (const auto& entry : pool_) out.push_back(entry.metric);
  return out;
}

void BestAverage::save(const std::filesystem::path& path) const {
  c10::impl::GenericDict blob(c10::StringType::get(), c10::AnyType::get());
  blob.insert("n", static_cast<std::int64_t>(count_));
  blob.insert("greater_is_better", true);
  c10::impl::GenericList metrics(c10::FloatType::get());
  c10::impl::GenericList states(c10::AnyType::get());
  for (const auto& entry : pool_) {
    metrics.push_back(entry.metric);
    states.push_back(models::tensor_dict(entry.state));
  }
  blob.insert("metrics", metrics);
  blob.insert("states", states);
  models::write_torch_file(path, blob);
}

std::size_t BestAverage::load(const std::filesystem::path& path) {
  const c10::IValue file = models::read_torch_file(path);
  pool_.clear();
  const auto blob = file.toGenericDict();
  const auto metrics = blob.at("metrics").toList();
  const auto states = blob.at("states").toList();
  for (std::size_t i = 0; i < metrics.size() && i < states.size(); ++i) {
    pool_.push_back({metrics.get(i).toDouble(), models::tensors_of(states.get(i))});
  }
  std::sort(pool_.begin(), pool_.end(), [](const Entry& a, const Entry& b) { return a.metric > b.metric; });
  if (static_cast<int>(pool_.size()) > count_) pool_.resize(static_cast<std::size_t>(std::max(0, count_)));
  return pool_.size();
}

}  // namespace libreyolo::train
