// The option table's validation, prediction, output, profiler, data-command and output-format keys (core/option_keys.h).
#include "core/option_keys.h"

#include <array>

namespace libreyolo::config::keys {

namespace {

constexpr auto kKeys = std::to_array<OptionSpec>({
    // --- validation
    {.name = "val", .type = T::boolean, .default_value = "true", .group = "validation",
     .help = "validate during training (false sets eval_interval=0)", .support = S::honoured},
    {.name = "eval_interval", .type = T::integer, .default_value = "10", .group = "validation",
     .help = "validate every N epochs (0 = never)", .minimum = 0, .maximum = 1e6, .support = S::honoured},
    {.name = "max_det", .type = T::integer, .default_value = "300", .group = "validation",
     .help = "most detections per image after NMS", .commands = run_model, .minimum = 1, .maximum = 100000, .support = S::honoured},
    {.name = "eval_max_det", .type = T::integer, .default_value = "none", .group = "validation",
     .help = "COCO maxDets for the metric (none = 1/10/100)", .commands = train_val, .minimum = 1,
     .maximum = 100000, .nullable = true, .support = S::honoured},
    {.name = "faster_coco_eval", .type = T::boolean, .default_value = "true", .group = "validation",
     .help = "accepted for LibreYOLO compatibility; the built-in COCO evaluator is always used",
     .commands = train_val, .support = S::logged,
     .why = "the built-in COCO evaluator is always used; its metrics equal pycocotools'"},
    {.name = "save_plots", .type = T::boolean, .default_value = "false", .group = "validation",
     .help = "after the final validation write <run>/val/: PR, F1, P and R curves and the confusion matrix (SVG), "
             "labelled and predicted samples (JPEG); val writes them into its run folder", .commands = train_val, .support = S::honoured},
    {.name = "plot_samples", .type = T::integer, .default_value = "8", .group = "validation",
     .help = "validation images drawn with save_plots", .commands = train_val, .minimum = 0, .maximum = 1000,
     .support = S::honoured},
    {.name = "val_loss", .type = T::boolean, .default_value = "false", .group = "validation",
     .help = "also compute the training loss on the validation batches (val/loss, val/<part> in results.csv)",
     .support = S::honoured},
    {.name = "best_metric", .type = T::text, .default_value = "", .group = "validation",
     .help = "metric that selects best.pt and drives patience: a metrics/ column of the task's results.csv, or its name "
             "without metrics/ (map50); empty: the task's (detect: metrics/mAP50-95)", .commands = train,
     .support = S::honoured},
    {.name = "patience", .type = T::integer, .default_value = "50", .group = "validation",
     .help = "stop after N epochs without a better best_metric (0 = never)", .minimum = 0, .maximum = 1e6, .support = S::honoured},
    {.name = "conf", .type = T::real, .default_value = "none", .group = "validation",
     .help = "confidence threshold (none = 0.001 for val, 0.25 for predict)",
     .commands = command_val | command_predict, .minimum = 0, .maximum = 1, .nullable = true, .support = S::honoured},
    {.name = "iou", .type = T::real, .default_value = "none", .group = "validation",
     .help = "NMS IoU threshold (none = 0.65 in training, 0.6 for val, 0.45 for predict)",
     .commands = command_val | command_predict, .minimum = 0, .maximum = 1, .nullable = true, .support = S::honoured},
    {.name = "split", .type = T::choice, .default_value = "val", .group = "validation",
     .help = "dataset split to validate", .commands = command_val, .choices = "val test train", .support = S::honoured},
    {.name = "save_json", .type = T::boolean, .default_value = "false", .group = "validation",
     .help = "write COCO-format predictions.json", .commands = command_val, .support = S::honoured},

    // --- predict
    {.name = "source", .type = T::text, .default_value = "", .group = "predict",
     .help = "image file or folder to run on", .commands = command_predict, .support = S::honoured},
    {.name = "save_txt", .type = T::boolean, .default_value = "true", .group = "predict",
     .help = "write YOLO-format txt results", .commands = command_predict, .support = S::honoured},

    // --- output
    {.name = "project", .type = T::text, .default_value = "runs/train", .group = "output",
     .help = "parent folder of the run (val and predict default to runs/val, runs/predict)", .commands = run_model, .support = S::honoured},
    {.name = "name", .type = T::text, .default_value = "exp", .group = "output",
     .help = "run folder name; taken names get 2, 3, ... appended", .commands = run_model, .support = S::honoured},
    {.name = "exist_ok", .type = T::boolean, .default_value = "false", .group = "output",
     .help = "reuse project/name if it exists instead of incrementing", .commands = run_model, .support = S::honoured},
    {.name = "save_period", .type = T::integer, .default_value = "10", .group = "output",
     .help = "write weights/epoch_N.pt every N epochs (<= 0 = never)", .minimum = -1, .maximum = 1e6, .support = S::honoured},
    {.name = "log_interval", .type = T::integer, .default_value = "10", .group = "output",
     .help = "iterations between log lines when stderr is not a terminal", .minimum = 1, .maximum = 1e6, .support = S::honoured},

    // --- profiler
    {.name = "profile", .type = T::boolean, .default_value = "false", .group = "profiler",
     .help = "profile a window of training steps and write profile artifacts", .commands = train, .support = S::honoured},
    {.name = "profile_then_stop", .type = T::boolean, .default_value = "false", .group = "profiler",
     .help = "stop training right after the profile window", .commands = train, .support = S::honoured},
    {.name = "profile_warmup", .type = T::integer, .default_value = "5", .group = "profiler",
     .help = "steps dropped before the measured window", .commands = train_profile, .minimum = 0, .maximum = 1e6, .support = S::honoured},
    {.name = "profile_steps", .type = T::integer, .default_value = "20", .group = "profiler",
     .help = "measured steps (at least 2)", .commands = train_profile, .minimum = 2, .maximum = 1e6, .support = S::honoured},
    {.name = "profile_trace", .type = T::boolean, .default_value = "true", .group = "profiler",
     .help = "collect operator/kernel traces and write profile_trace.json and timeline.html",
     .commands = train_profile, .support = S::honoured},
    {.name = "profile_open", .type = T::boolean, .default_value = "true", .group = "profiler",
     .help = "open timeline.html in a browser when a display is available", .commands = train_profile, .support = S::honoured},

    // --- info command
    {.name = "nc", .type = T::integer, .default_value = "80", .group = "model/data",
     .help = "number of classes of a model built from scratch (training takes it from the data YAML)",
     .commands = command_info, .minimum = 1, .maximum = 100000, .support = S::honoured},

    // --- data command
    {.name = "out", .type = T::text, .default_value = "", .group = "data",
     .help = "output: the folder `data synth` and `data crops` write, the image `data preview` writes", .commands = command_data, .support = S::honoured},
    {.name = "crop_margin", .type = T::real, .default_value = "0.1", .group = "data",
     .help = "`data crops`: added to each side of a box, as a share of its side", .commands = command_data, .minimum = 0, .maximum = 10,
     .support = S::honoured},
    {.name = "crop_min_size", .type = T::integer, .default_value = "32", .group = "data",
     .help = "`data crops`: a crop's shorter side in pixels at least (smaller boxes are left out)", .commands = command_data,
     .minimum = 1, .maximum = 100000, .support = S::honoured},
    {.name = "val_fraction", .type = T::real, .default_value = "0.2", .group = "data",
     .help = "`data crops`: share of the images whose crops go to val (by a hash of the file name)", .commands = command_data,
     .minimum = 0, .maximum = 1, .support = S::honoured},
    {.name = "synth_images", .type = T::integer, .default_value = "240", .group = "data",
     .help = "training images `data synth` generates", .commands = command_data, .minimum = 1, .maximum = 1e7, .support = S::honoured},
    {.name = "synth_val_images", .type = T::integer, .default_value = "60", .group = "data",
     .help = "validation images `data synth` generates", .commands = command_data, .minimum = 0, .maximum = 1e7, .support = S::honoured},
    {.name = "synth_size", .type = T::integer, .default_value = "320", .group = "data",
     .help = "side of the square images `data synth` generates", .commands = command_data, .minimum = 32,
     .maximum = 8192, .support = S::honoured},
    {.name = "preview_images", .type = T::integer, .default_value = "16", .group = "data",
     .help = "augmented samples in the `data preview` grid", .commands = command_data, .minimum = 1, .maximum = 256, .support = S::honoured},
    {.name = "bench_batches", .type = T::integer, .default_value = "20", .group = "data",
     .help = "batches timed per `data bench` run (after one warm-up epoch start)", .commands = command_data,
     .minimum = 1, .maximum = 1e6, .support = S::honoured},
    {.name = "repeat", .type = T::integer, .default_value = "5", .group = "data",
     .help = "`data bench` runs; the median is reported", .commands = command_data, .minimum = 1, .maximum = 1000, .support = S::honoured},

    // --- agent / output format
    {.name = "json", .type = T::boolean, .default_value = "false", .group = "agent",
     .help = "print the final result object as JSON on stdout", .commands = command_all, .support = S::honoured},
    {.name = "quiet", .type = T::boolean, .default_value = "false", .group = "agent",
     .help = "print only warnings and errors", .commands = command_all, .support = S::honoured},
    {.name = "dry_run", .type = T::boolean, .default_value = "false", .group = "agent",
     .help = "print the resolved configuration and stop before loading data", .commands = run_model, .support = S::honoured},
});

}  // namespace

std::span<const OptionSpec> output_keys() { return kKeys; }

}  // namespace libreyolo::config::keys
