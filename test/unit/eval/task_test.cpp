// The task seam: task= picks the task, detection's metric columns and best metric come from it,
// a checkpoint of another task is refused, and an unknown task is named as such.
#include "eval/task.h"

#include "core/error.h"
#include "models/checkpoint.h"
#include "models/targets.h"

#include <ATen/ATen.h>

#include <cmath>
#include <string>
#include <vector>

#include "catch.h"  // last: see catch.h

using namespace libreyolo;

TEST_CASE("task=detect is the detection task; classify the other built", "[task]") {
  const auto config = models::parse_arguments(config::command_train, std::vector<std::string>{"task=detect"});
  const eval::Task& task = eval::task_of(config);
  CHECK(task.name() == "detect");
  CHECK(&task == &eval::detect_task());
  CHECK(&eval::task_named("detect") == &task);
  REQUIRE(eval::tasks().size() == 2);
  CHECK(eval::tasks()[1] == &eval::classify_task());
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

TEST_CASE("A classifier implies task=classify; LibreYOLO's spellings are accepted; a model of the other task is refused", "[task]") {
  const auto named = [](std::vector<std::string> arguments) {
    return eval::task_of(models::parse_arguments(config::command_train, arguments)).name();
  };
  CHECK(named({"model=mobilenetv4-s"}) == "classify");
  CHECK(named({"model=resnet-50"}) == "classify");
  CHECK(named({"model=yolox-s"}) == "detect");
  CHECK(named({"model=resnet-18", "task=cls"}) == "classify");
  CHECK(named({"model=resnet-18", "task=classification"}) == "classify");
  // the recipe of libreyolo 1.6.0's MobileNetV4Config / ResNetConfig
  const auto config = models::parse_arguments(config::command_train, std::vector<std::string>{"model=mobilenetv4-l"});
  CHECK(config.get_text("optimizer") == "adamw");
  CHECK(config.get_real("lr0") == 0.001);
  CHECK(config.get_real("weight_decay") == 0.0001);
  CHECK(config.get_int("epochs") == 100);
  CHECK(config.get_int("batch") == 64);
  CHECK(config.get_real("warmup_epochs") == 1);
  CHECK(config.get_real("min_lr_ratio") == 0.01);
  CHECK(config.get_int("no_aug_epochs") == 0);
  CHECK(config.get_image_size("imgsz").height == 256);
  CHECK(config.get_real("crop_pct") == 0.95);
  CHECK(models::parse_arguments(config::command_train, std::vector<std::string>{"model=mobilenetv4-s"}).get_real("crop_pct") == 0.875);
  // a named model is built for its family's task
  const auto loaded = models::load_model("resnet-18", 3);
  CHECK(loaded.task == "classify");
  CHECK_THROWS_AS(eval::check_model_task(loaded.task, eval::detect_task(), "resnet-18"), UsageError);
  CHECK_NOTHROW(eval::check_model_task(loaded.task, eval::classify_task(), "resnet-18"));
}

TEST_CASE("Classification's metric columns come from its validator; top-1 selects best.pt; no COCO files", "[task]") {
  const eval::Task& task = eval::classify_task();
  CHECK(task.default_best_metric() == "metrics/accuracy_top1");
  CHECK(task.best_metric_column("accuracy_top5") == "metrics/accuracy_top5");
  CHECK_THROWS_AS(task.best_metric_column("mAP50"), UsageError);
  eval::Validation v;
  v.computed = {{"metrics/accuracy_top1", 0.75}, {"metrics/accuracy_top5", 1.0}, {"metrics/precision", 0.5},
                {"metrics/recall", 0.6}, {"metrics/f1", 0.55}};
  const eval::Metrics metrics = task.metrics(v);
  REQUIRE(metrics.size() == task.metric_names().size());
  for (std::size_t i = 0; i < metrics.size(); ++i) CHECK(metrics[i].first == task.metric_names()[i]);
  CHECK(task.summary(v) == "top1: 0.7500, top5: 1.0000");
  CHECK_THAT(task.table(v, {}), Catch::Contains("top-1 accuracy: 0.7500"));
  CHECK(task.drops_incomplete_batch());
  CHECK_FALSE(eval::detect_task().drops_incomplete_batch());
}

TEST_CASE("A classification batch's targets: a class per image, moved and copied as a captured loss needs", "[task]") {
  const at::Tensor rows = at::tensor({2, 0, 1}, at::kLong);
  const models::TargetBatch targets = eval::classify_task().loss_targets(rows, at::zeros({3, 3, 8, 8}), 0, at::kCPU);
  CHECK(targets.batch_size() == 3);
  CHECK(targets.slots() == 0);
  CHECK_FALSE(targets.valid.defined());
  models::TargetBatch copy = targets.clone();
  copy.copy_(models::TargetBatch::of_classes(at::tensor({1, 1, 1}, at::kLong)));
  CHECK(copy.classes.equal(at::tensor({1, 1, 1}, at::kLong)));
  CHECK(targets.classes.equal(rows));  // the clone is its own storage
  // a detection batch into a classification one is a programming error
  models::TargetBatch boxes = models::pad_targets(at::zeros({0, 6}), 3, 8, 8, 2);
  CHECK_THROWS_AS(copy.copy_(boxes), std::invalid_argument);
}
