// The live epoch line on stderr (Ultralytics' layout): redrawn in place on a terminal; when
// stderr is not a terminal, printed every `log_interval` batches and at the end of the epoch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace libreyolo::train {

struct ProgressValues {
  int epoch = 0, epochs = 0;  // 1-based epoch
  double memory_gb = 0;
  std::vector<double> losses;
  std::int64_t instances = 0;
  int size = 0;
  std::size_t done = 0, total = 0;
  double elapsed = 0, images_per_second = 0, data_share = 0;
};

class Progress {
 public:
  Progress(bool quiet, std::vector<std::string> loss_names, int log_interval, bool terminal);

  std::string header() const;
  void print_header() const;
  static std::string line(const ProgressValues& values);
  // After a batch: redraws the line on a terminal, or prints it every log_interval batches.
  void update(const ProgressValues& values);
  // The epoch's closing line, printed once and written to train.log.
  void finish(const ProgressValues& values);

 private:
  bool quiet_, tty_;
  std::vector<std::string> names_;
  int log_interval_;
};

}  // namespace libreyolo::train
