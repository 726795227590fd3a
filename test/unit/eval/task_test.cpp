// The task seam: task= picks the task, detection's metric columns and best metric come from it,
// a checkpoint of another task is refused, and an unknown task is named as such.
#include "eval/task.h"

#include "core/error.h"
#include "models/checkpoint.h"

#include <cmath>
#include <string>
#include <vector>

#include "catch.h"  // last: see catch.h

using namespace libreyolo;

TEST_CASE("task=detect is the detection task, and the only one built", "[task]") {
  const auto config = models::parse_arguments(config::command_train, std::vector<std::string>{"task=detect"});
  const eval::Task& task = eval::task_of(config);
  CHECK(task.name() == "detect");
  CHECK(&task == &eval::detect_task());
  CHECK(&eval::task_named("detect") == &task);
  REQUIRE(eval::tasks().size() == 1);
  CHECK_THROWS_AS(eval::task_named("segment"), ModelError);
  // task= takes only built tasks: the option refuses others before any task is asked
  CHECK_THROWS_AS(models::parse_arguments(config::command_train, std::vector<std::string>{"task=segment"}), UsageError);
  // data check reads the key too
  CHECK(eval::task_of(models::parse_arguments(config::command_data, std::vector<std::string>{"task=detect"})).name() == "detect");
}

TEST_CASE("Detection's metric columns, in results.csv's order, and the best metric by column", "[task]") {
  const eval::Task& task = eval::detect_task();
  eval::Validation v;
  v.coco.stats = {0.4, 0.6, 0.45, 0, 0, 0, 0, 0, 0.5, 0, 0, 0};
  v.pr.mean_precision = 0.7;
  v.pr.mean_recall = 0.55;
  const eval::Metrics metrics = task.metrics(v);
  REQUIRE(metrics.size() == task.metric_names().size());
  for (std::size_t i = 0; i < metrics.size(); ++i) CHECK(metrics[i].first == task.metric_names()[i]);
  CHECK(task.default_best_metric() == "metrics/mAP50-95");
  CHECK(task.metric(v, "metrics/mAP50-95") == 0.4);
  CHECK(task.metric(v, "metrics/mAP50") == 0.6);
  CHECK(task.metric(v, "metrics/mAP75") == 0.45);
  CHECK(task.metric(v, "metrics/precision") == 0.7);
  CHECK(task.metric(v, "metrics/recall") == 0.55);
  CHECK(std::isnan(task.metric(v, "metrics/top1")));  // not a detection column
  CHECK(task.summary(v) == "mAP50: 0.6000, mAP50-95: 0.4000");
  // best_metric= names a column, or its name without metrics/ in any case; empty: the task's
  CHECK(task.best_metric_column("") == "metrics/mAP50-95");
  CHECK(task.best_metric_column("metrics/mAP50") == "metrics/mAP50");
  CHECK(task.best_metric_column("map50") == "metrics/mAP50");
  CHECK(task.best_metric_column("MAP50-95") == "metrics/mAP50-95");
  CHECK(task.best_metric_column("Recall") == "metrics/recall");
  try {
    (void)task.best_metric_column("fitness");
    FAIL("accepted a column detection does not write");
  } catch (const UsageError& error) {
    CHECK_THAT(error.what(), Catch::Contains("best_metric=fitness") && Catch::Contains("metrics/mAP75"));
  }
  CHECK_THROWS_AS(task.best_metric_column("metrics/top1"), UsageError);
}

TEST_CASE("A model trained for another task is refused with both tasks named", "[task]") {
  CHECK_NOTHROW(eval::check_model_task("detect", eval::detect_task(), "best.pt"));
  try {
    eval::check_model_task("segment", eval::detect_task(), "seg.pt");
    FAIL("accepted a segmentation checkpoint for detection");
  } catch (const UsageError& error) {
    CHECK_THAT(error.what(), Catch::Contains("seg.pt") && Catch::Contains("'segment'") && Catch::Contains("'detect'"));
  }
}
