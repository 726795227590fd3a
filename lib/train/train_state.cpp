#include "train/train_state.h"

#include "core/log.h"
#include "models/checkpoint.h"

#include <algorithm>

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
  optimizer_steps = start_epoch * steps_per_epoch() + start_batch / accumulate;
}

}  // namespace libreyolo::train
