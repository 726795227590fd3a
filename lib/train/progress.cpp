#include "train/progress.h"

#include "core/log.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace libreyolo::train {

namespace {

std::string format_duration(double seconds) {
  const auto s = static_cast<long>(std::max(0.0, seconds));
  return s >= 3600 ? fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60) : fmt::format("{:02}:{:02}", s / 60, s % 60);
}

}  // namespace

Progress::Progress(bool quiet, std::vector<std::string> loss_names, int log_interval, bool terminal)
    : quiet_(quiet), tty_(terminal), names_(std::move(loss_names)), log_interval_(std::max(1, log_interval)) {}

std::string Progress::header() const {
  std::string h = fmt::format("{:>11}{:>11}", "Epoch", "GPU_mem");
  for (const auto& n : names_) h += fmt::format("{:>11}", n);
  return h + fmt::format("{:>11}{:>11}", "Instances", "Size");
}

void Progress::print_header() const {
  if (!quiet_) log::write("", fmt::format("\n{}", header()));
}

std::string Progress::line(const ProgressValues& v) {
  std::string l = fmt::format("{:>11}{:>11}", fmt::format("{}/{}", v.epoch, v.epochs), fmt::format("{:.3g}G", v.memory_gb));
  // "-": not read yet this epoch (on a GPU the losses are read every few steps)
  for (const double loss : v.losses) l += std::isnan(loss) ? fmt::format("{:>11}", "-") : fmt::format("{:>11.4g}", loss);  // as Ultralytics: 5.3e+13 keeps its column
  const int width = 10, filled = v.total ? static_cast<int>(width * v.done / v.total) : width;
  std::string bar;
  for (int i = 0; i < width; ++i) bar += i < filled ? "█" : " ";
  const double eta = v.done ? v.elapsed / static_cast<double>(v.done) * static_cast<double>(v.total - v.done) : 0;
  l += fmt::format("{:>11}{:>11}: {:3}%|{}| {}/{} [{}<{}, {:.1f} img/s, data {:.0f}%]", v.instances, v.size,
                   v.total ? 100 * v.done / v.total : 100, bar, v.done, v.total, format_duration(v.elapsed),
                   format_duration(eta), v.images_per_second, 100 * v.data_share);
  return l;
}

void Progress::update(const ProgressValues& values) {
  if (quiet_) return;
  if (tty_) {
    fmt::print(stderr, "\r{}\033[K", line(values));
  } else if (values.done % static_cast<std::size_t>(log_interval_) == 0 && values.done < values.total) {
    log::write("", line(values));  // the epoch's last batch is printed by finish()
  }
}

void Progress::finish(const ProgressValues& values) {
  const std::string text = line(values);
  if (quiet_) {
    log::to_file(text);
  } else if (tty_) {
    fmt::print(stderr, "\r{}\033[K\n", text);
    log::to_file(text);
  } else {
    log::write("", text);
  }
}

}  // namespace libreyolo::train
