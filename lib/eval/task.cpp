#include "eval/task.h"

#include "core/error.h"
#include "core/text.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <limits>

namespace libreyolo::eval {

std::string PredictWriter::line(std::int64_t found) const { return fmt::format("{} {}", found, unit()); }

double Task::metric(const Validation& validation, std::string_view name) const {
  for (const auto& [column, value] : metrics(validation)) {
    if (column == name) return value;
  }
  return std::numeric_limits<double>::quiet_NaN();
}

std::string Task::best_metric_column(std::string_view asked) const {
  if (asked.empty()) return std::string(default_best_metric());
  const std::string wanted = ascii_lower(asked);
  constexpr std::string_view prefix = "metrics/";
  for (const std::string_view column : metric_names()) {
    const std::string known = ascii_lower(column);
    if (wanted == known || (known.starts_with(prefix) && wanted == known.substr(prefix.size()))) return std::string(column);
  }
  throw UsageError(fmt::format("best_metric={}: task={} writes no such column; give one of {} (or its name without metrics/)",
                               asked, name(), fmt::join(metric_names(), ", ")));
}

std::span<const Task* const> tasks() {
  static const std::array<const Task*, 2> all{&detect_task(), &classify_task()};
  return all;
}

namespace {

std::string task_list() {
  std::string known;
  for (const Task* task : tasks()) known += fmt::format("{}{}", known.empty() ? "" : ", ", task->name());
  return known;
}

}  // namespace

const Task& task_named(std::string_view name) {
  for (const Task* task : tasks()) {
    if (task->name() == name) return *task;
  }
  throw ModelError(fmt::format("task '{}' is not built (tasks: {})", name, task_list()));
}

const Task& task_of(const config::Config& config) {
  const std::string& name = config.get_text("task");
  for (const Task* task : tasks()) {
    if (task->name() == name) return *task;
  }
  throw UsageError(fmt::format("task={} is not built; task= takes {}", name, task_list()));
}

void check_model_task(std::string_view model_task, const Task& task, std::string_view model) {
  if (model_task == task.name()) return;
  throw UsageError(fmt::format("model={} was trained for task '{}', and this run's task is '{}': give task={} or a {} model",
                               model, model_task, task.name(), model_task, task.name()));
}

}  // namespace libreyolo::eval
