#include "train/train_state.h"

#include "core/log.h"
#include "models/checkpoint.h"

#include <algorithm>
#include <cmath>

namespace libreyolo::train {

void TrainState::reset_epoch_sums() {
  loss_sums.assign(loss_names.size(), 0.0);
  total_sum = 0;
  seen = 0;
}

void TrainState::add_loss_sums(double total, const std::vector<double>& parts, std::int64_t steps) {
  total_sum += total;
  for (std::size_t i = 0; i < parts.size() && i < loss_sums.size(); ++i) loss_sums[i] += parts[i];
  seen += steps;
}

std::vector<double> TrainState::loss_means() const {
  std::vector<double> means;
  for (const double s : loss_sums) means.push_back(seen ? s / static_cast<double>(seen) : std::nan(""));
  return means;
}

void TrainState::write(models::Checkpoint& c, int epoch_done, std::int64_t batches_done) const {
  c.set_extra("epoch", static_cast<std::int64_t>(epoch_done));
  if (batches_done) {
    c.set_extra("epoch_batches_done", batches_done);
    c10::impl::GenericDict partial(c10::StringType::get(), c10::AnyType::get());
    partial.insert("seen", seen);
    partial.insert("total", total_sum);
    c10::impl::GenericList parts(c10::FloatType::get());
    for (const double v : loss_sums) parts.push_back(v);
    partial.insert("parts", parts);
    c.set_extra("epoch_partial", partial);
  }
  c.set_extra("best_mAP50_95", best_map50_95);
  c.set_extra("best_mAP50", best_map50);
  c.set_extra("best_epoch", static_cast<std::int64_t>(best_epoch));
  c.set_extra("best_metric_key", metric_name);
  c.set_extra("best_metric_value", best_metric);
  if (std::isfinite(last_epoch_loss)) c.set_extra("loss", last_epoch_loss);
  c.set_extra("train_seconds", train_seconds);
}

void TrainState::read(const models::Checkpoint& c) {
  const auto int_of = [&](const char* key, std::int64_t fallback) {
    const auto* v = c.extra(key);
    return v && v->isInt() ? v->toInt() : fallback;
  };
  const auto real_of = [&](const char* key, double fallback) {
    const auto* v = c.extra(key);
    return v && v->isDouble() ? v->toDouble() : (v && v->isInt() ? static_cast<double>(v->toInt()) : fallback);
  };
  start_epoch = static_cast<int>(int_of("epoch", -1)) + 1;
  start_batch = int_of("epoch_batches_done", 0);
  best_map50_95 = real_of("best_mAP50_95", -1);
  train_seconds = real_of("train_seconds", 0);
  best_map50 = real_of("best_mAP50", -1);
  best_epoch = static_cast<int>(int_of("best_epoch", 0));
  const auto* key = c.extra("best_metric_key");
  const std::string saved_key = key && key->isString() ? key->toStringRef() : "metrics/mAP50-95";
  if (saved_key == metric_name) {
    best_metric = real_of("best_metric_value", best_map50_95);
  } else {  // as LibreYOLO: another metric starts its tracking afresh
    log::warn("best_metric={} differs from the checkpoint's {}: best-model tracking starts afresh", metric_name, saved_key);
    best_metric = -1;
    best_epoch = 0;
  }
  reset_epoch_sums();
  if (start_batch > 0) {
    if (const auto* partial = c.extra("epoch_partial"); partial && partial->isGenericDict()) {
      const auto d = partial->toGenericDict();
      seen = d.at("seen").toInt();
      total_sum = d.at("total").toDouble();
      const auto parts = d.at("parts").toList();
      for (std::size_t i = 0; i < loss_sums.size() && i < parts.size(); ++i) loss_sums[i] = parts.get(i).toDouble();
    }
  }
  restore_steps();
}

void TrainState::restore_steps() {
  if (ramp) {  // the steps before the resumed position, as the ramp placed them
    const std::int64_t position = start_epoch * batches_per_epoch + start_batch;
    optimizer_steps = 0;
    last_step = -1;
    for (std::int64_t next = next_step_after(-1); next < position; next = next_step_after(last_step)) {
      ++optimizer_steps;
      last_step = next;
    }
  } else {
    optimizer_steps = start_epoch * steps_per_epoch() + start_batch / accumulate;
  }
}

void TrainState::set_nominal_batch(std::int64_t nbs, std::int64_t global_batch_size, double warmup_epochs, bool ramp_windows) {
  nominal_ratio = static_cast<double>(nbs) / static_cast<double>(global_batch_size);
  accumulate = std::max<std::int64_t>(1, static_cast<std::int64_t>(std::nearbyint(nominal_ratio)));
  ramp = ramp_windows;
  ramp_batches = 0;
  weight_decay_scale = 1;
  if (!ramp) return;
  // as the linear_epoch schedule counts its warm-up
  const double warmup = warmup_epochs * static_cast<double>(batches_per_epoch);
  ramp_batches = warmup > 0 ? std::max<std::int64_t>(std::llround(warmup), 100) : 0;
  weight_decay_scale = static_cast<double>(global_batch_size * accumulate) / static_cast<double>(nbs);
}

std::int64_t TrainState::accumulate_at(std::int64_t n) const {
  if (n > ramp_batches) return accumulate;  // yolov5 keeps the last warm-up value: round(nominal_ratio)
  // numpy.interp's arithmetic (slope first), then numpy's round half to even
  const double value = n == ramp_batches ? nominal_ratio
                                          : (nominal_ratio - 1.0) / static_cast<double>(ramp_batches) * static_cast<double>(n) + 1.0;
  return std::max<std::int64_t>(1, static_cast<std::int64_t>(std::nearbyint(value)));
}

std::int64_t TrainState::next_step_after(std::int64_t last) const {
  std::int64_t n = last + 1;
  while (n - last < accumulate_at(n)) ++n;
  return n;
}

bool TrainState::window_begins() const {
  if (!ramp) return batch == window_start();
  return batch == 0 || global_batch() == last_step + 1;
}

bool TrainState::window_ends() const {
  if (!ramp) return batch + 1 - window_start() == window_length();
  return global_batch() == next_step_after(last_step);
}

double TrainState::loss_divisor() const { return ramp ? 1.0 : static_cast<double>(window_length()); }

}  // namespace libreyolo::train
