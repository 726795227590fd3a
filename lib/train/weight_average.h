// average_best=N (LibreYOLO): a pool of the N best validated snapshots (EMA weights, ranked by
// best_metric). At the end of training their floating tensors are averaged (integer buffers come
// from the best one) into weights/average.pt. The pool lives in weights/average_pool.pt too, in
// LibreYOLO's layout {n, greater_is_better, metrics, states}, so a resumed run keeps it.
#pragma once

#include "models/safetensors.h"

#include <filesystem>
#include <optional>
#include <vector>

namespace libreyolo::train {

class BestAverage {
 public:
  explicit BestAverage(int count) : count_(count) {}

  // A snapshot with its metric (copied to the CPU); true when it entered the pool, replacing the
  // worst one when the pool is full. Non-finite metrics never enter.
  bool consider(const models::NamedTensors& state, double metric);
  std::optional<models::NamedTensors> average() const;
  std::size_t size() const { return pool_.size(); }
  int capacity() const { return count_; }
  std::vector<double> metrics() const;

  void save(const std::filesystem::path& path) const;
  // Replaces the pool from `path` (the best `capacity` snapshots); returns how many it holds.
  std::size_t load(const std::filesystem::path& path);

 private:
  struct Entry {
    double metric;
    models::NamedTensors state;
  };
  int count_;
  std::vector<Entry> pool_;
};

}  // namespace libreyolo::train
