// `libreyolo val model=... data=...`: COCO metrics of a model on a split, Ultralytics' table on
// stderr, optional COCO-format predictions.json, --json for the metrics object.
#include "commands.h"
#include "core/atomic_file.h"
#include "core/config.h"
#include "core/option_help.h"
#include "models/family.h"
#include "core/error.h"
#include "core/log.h"
#include "core/run_dir.h"
#include "data/training_data.h"
#include "eval/task.h"
#include "eval/validator.h"
#include "models/checkpoint.h"
#include "train/trainer.h"

#include <fmt/core.h>
#include <nlohmann/json.hpp>

namespace libreyolo::cli {


namespace {

bool is_checkpoint_file(const std::string& model) {
  std::error_code error;
  return std::filesystem::path(model).extension() == ".pt" && std::filesystem::is_regular_file(model, error);
}

}  // namespace

int run_val(const Arguments& arguments) {
  if (wants_help(arguments)) {
    fmt::print("{}", models::command_help(config::command_val));
    return 0;
  }
  const auto config = models::parse_arguments(config::command_val, arguments);
  log::set_quiet(config.get_bool("quiet"));
  // a checkpoint file is read once, before the data: its training configuration may name the data
  // and single_cls (its own class count wins over the data's anyway)
  std::optional<models::Checkpoint> saved;
  std::optional<models::LoadedModel> loading;
  if (is_checkpoint_file(config.get_text("model"))) loading = models::load_model(config.get_text("model"), 1, &saved);
  const auto trained = saved ? models::saved_training_config(*saved) : std::map<std::string, std::string>();
  saved.reset();
  std::string data = config.get_text("data");
  if (data.empty() && trained.contains("data") && trained.at("data") != "none" && !trained.at("data").empty()) {
    data = trained.at("data");  // as LibreYOLO's val(): the data the checkpoint was trained on
    log::info("data={} (the checkpoint's training data; give data= to validate on another)", data);
  }
  if (data.empty()) throw UsageError("data= is required: libreyolo val model=best.pt data=coco128");
  const eval::Task& task = eval::task_of(config);
  auto spec = task.load_spec(data);
  // a model trained with single_cls=true predicts one class: LibreYOLO's validator merges the
  // dataset's classes for it too
  const bool trained_single_class = trained.contains("single_cls") && trained.at("single_cls") == "true";
  const bool single_class = config.get_bool("single_cls") || trained_single_class;
  if (trained_single_class && !config.get_bool("single_cls") && spec.class_count() > 1) {
    log::info("the checkpoint was trained with single_cls=true: validating with the {} dataset classes merged into one",
              spec.class_count());
  }
  if (single_class) spec.merge_classes();
  const std::string split = config.get_text("split");
  if (spec.split(split).empty()) throw DataError(fmt::format("{}: no '{}' split", spec.yaml_file.string(), split));
  if (!loading) loading = models::load_model(config.get_text("model"), spec.class_count());
  models::LoadedModel& loaded = *loading;
  if (loaded.class_count != spec.class_count()) {
    throw ModelError(fmt::format("{} predicts {} classes but {} has {}{}", config.get_text("model"), loaded.class_count,
                                 spec.yaml_file.string(), spec.class_count(),
                                 single_class ? " (single_cls=true merges the dataset's classes into one; leave it out "
                                                "for a model that predicts the dataset's classes)"
                                              : ""));
  }
  eval::check_model_task(loaded.task, task, config.get_text("model"));
  const int image_size = !config.user_provided("imgsz") && loaded.image_size > 0
                             ? loaded.image_size : config.get_image_size("imgsz").height;
  const models::Family& family = models::family(loaded.name.family);
  const auto dataset_owner = task.load_split(spec, split, static_cast<int>(config.get_int("workers")), image_size,
                                             data::CacheMode::none,
                                             family.sample_pipeline() ? family.sample_pipeline()->resize_rule() : data::ResizeRule::round_up);
  const auto& dataset = *dataset_owner;
  const c10::Device device = train::resolve_device(config.get_text("device"));
  train::log_ignored_keys(config);
  loaded.model.module->to(device);
  loaded.model.module->eval();
  const auto validator = task.make_validator(dataset, {.family = &family,
                                            .batch_size = static_cast<int>(std::max<std::int64_t>(1, config.get_int("batch"))),
                                            .image_size = image_size,
                                            .confidence = config.is_none("conf") ? family.validation_confidence() : config.get_real("conf"),
                                            .iou = config.is_none("iou") ? 0.6 : config.get_real("iou"),
                                            .max_detections = static_cast<int>(config.get_int("max_det")),
                                            .coco_max_detections = config.is_none("eval_max_det") ? 100 : static_cast<int>(config.get_int("eval_max_det")),
                                            .workers = static_cast<int>(std::max<std::int64_t>(1, config.get_int("workers"))),
                                            .device = device,
                                            .crop_pct = config.get_real("crop_pct")});
  const auto result = validator->run([&](const at::Tensor& x) { return loaded.model.forward(x); });
  if (!config.get_bool("quiet")) fmt::print(stderr, "{}", task.table(result, spec.names));
  log::info("Speed: {:.1f} ms per image ({} images in {:.1f}s)", 1000 * result.seconds / std::max<std::int64_t>(1, result.images),
            result.images, result.seconds);
  nlohmann::ordered_json out = {{"model", loaded.model.display_name},
                                {"data", spec.yaml_file.string()},
                                {"split", split},
                                {"images", result.images},
                                {"instances", result.instances}};
  for (const auto& [column, value] : task.metrics(result)) out[column] = value;
  if (result.computed.empty()) out["stats"] = result.coco.stats;  // COCOeval's twelve (detection's)
  std::filesystem::path run_dir;
  if (config.get_bool("save_json") || config.get_bool("save_plots")) {
    const std::string project = config.source("project") == config::Source::table_default ? "runs/val" : config.get_text("project");
    run_dir = create_run_dir(project, config.get_text("name"), config.get_bool("exist_ok"));
  }
  if (config.get_bool("save_plots")) {
    const int written = task.write_plots(run_dir, result, spec.names, dataset, static_cast<int>(config.get_int("plot_samples")));
    log::info("save_plots: {} files in {}", written, run_dir.string());
  }
  if (config.get_bool("save_json")) {
    const auto [predictions, count] = task.predictions_json(result, dataset, spec);
    write_file_atomically(run_dir / "predictions.json", predictions.dump());
    log::info("Saved {} ({} detections)", (run_dir / "predictions.json").string(), count);
    out["predictions"] = (run_dir / "predictions.json").string();
  }
  if (config.get_bool("json")) fmt::print("{}\n", out.dump());
  return 0;
}

}  // namespace libreyolo::cli
