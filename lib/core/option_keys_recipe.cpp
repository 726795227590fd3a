// The option table's optimizer, schedule, augmentation, loss and EMA keys (core/option_keys.h).
#include "core/option_keys.h"

#include <array>

namespace libreyolo::config::keys {

namespace {

constexpr auto kKeys = std::to_array<OptionSpec>({
    // --- optimizer
    {.name = "optimizer", .type = T::choice, .default_value = "sgd", .group = "optimizer",
     .help = "optimizer: sgd (nesterov), adam or adamw", .choices = "sgd adam adamw", .support = S::honoured},
    {.name = "lr0", .type = T::real, .default_value = "0.01", .group = "optimizer",
     .help = "initial (peak) learning rate", .minimum = 0, .maximum = 1, .support = S::honoured},
    {.name = "momentum", .type = T::real, .default_value = "0.937", .group = "optimizer",
     .help = "SGD momentum", .minimum = 0, .maximum = 1, .support = S::honoured},
    {.name = "weight_decay", .type = T::real, .default_value = "0.0005", .group = "optimizer",
     .help = "weight decay of conv/linear weights (BN weights and biases get none)", .minimum = 0, .maximum = 1, .support = S::honoured},
    {.name = "nesterov", .type = T::boolean, .default_value = "true", .group = "optimizer",
     .help = "Nesterov momentum for SGD", .support = S::honoured},

    // --- scheduler
    {.name = "scheduler", .type = T::choice, .default_value = "yoloxwarmcos", .group = "scheduler",
     .help = "LR schedule (linear_epoch: YOLOv5's and Ultralytics' linear, held per epoch, after a warmup of at least 100 iterations)",
     .choices = "yoloxwarmcos linear linear_epoch cos flat_cosine constant",
     .synonyms = "warmcos=cos cosine=cos", .support = S::honoured},
    {.name = "warmup_epochs", .type = T::real, .default_value = "5", .group = "scheduler",
     .help = "warmup length in epochs", .minimum = 0, .maximum = 1e6, .support = S::honoured},
    {.name = "warmup_lr_start", .type = T::real, .default_value = "0.0", .group = "scheduler",
     .help = "learning rate at the start of warmup (clamped to lr0)", .minimum = 0, .maximum = 1, .support = S::honoured},
    {.name = "warmup_bias_lr", .type = T::real, .default_value = "0.0", .group = "scheduler",
     .help = "learning rate of the YOLO families' bias group (pg2) at the start of warmup, falling to the schedule's (YOLOv5: 0.1; 0: the biases "
             "warm up like the rest; the DETRs' own groups have no bias group)",
     .minimum = 0, .maximum = 1, .support = S::honoured},
    {.name = "warmup_momentum", .type = T::real, .default_value = "0.8", .group = "scheduler",
     .help = "momentum at the start of warmup (YOLOv9 warms momentum up to `momentum`)", .minimum = 0, .maximum = 1, .support = S::honoured},
    {.name = "min_lr_ratio", .type = T::real, .default_value = "0.05", .group = "scheduler",
     .help = "final learning rate as a fraction of lr0", .minimum = 0, .maximum = 1, .support = S::honoured},
    {.name = "lr_drop", .type = T::integer, .default_value = "100", .group = "scheduler",
     .help = "epoch of RF-DETR's step LR drop; not supported (YOLOv9/YOLOX use scheduler=): only the default is accepted", .minimum = 0, .maximum = 1e6, .support = S::refused,
     .why = "the step LR drop belongs to RF-DETR, which is not trained here"},

    // --- augmentation
    {.name = "mosaic", .type = T::real, .default_value = "1.0", .group = "augmentation",
     .help = "probability of a 4-image mosaic", .commands = train_data, .minimum = 0, .maximum = 1, .support = S::honoured},
    {.name = "mixup", .type = T::real, .default_value = "1.0", .group = "augmentation",
     .help = "probability of mixup", .commands = train_data, .minimum = 0, .maximum = 1, .support = S::honoured},
    {.name = "hsv_prob", .type = T::real, .default_value = "1.0", .group = "augmentation",
     .help = "probability of the HSV colour jitter", .commands = train_data, .minimum = 0, .maximum = 1, .support = S::honoured},
    {.name = "hsv_hue", .type = T::real, .default_value = "0.015", .group = "augmentation",
     .help = "hue gain of the multiplicative HSV jitter (YOLOv9; YOLOX uses fixed additive deltas 5/30/30)", .commands = train_data,
     .minimum = 0, .maximum = 1, .support = S::honoured},
    {.name = "hsv_saturation", .type = T::real, .default_value = "0.7", .group = "augmentation",
     .help = "saturation gain of the multiplicative HSV jitter (YOLOv9)", .commands = train_data, .minimum = 0, .maximum = 1, .support = S::honoured},
    {.name = "hsv_value", .type = T::real, .default_value = "0.4", .group = "augmentation",
     .help = "value gain of the multiplicative HSV jitter (YOLOv9)", .commands = train_data, .minimum = 0, .maximum = 1, .support = S::honoured},
    {.name = "flip_prob", .type = T::real, .default_value = "0.5", .group = "augmentation",
     .help = "probability of a horizontal flip", .commands = train_data, .minimum = 0, .maximum = 1, .support = S::honoured},
    {.name = "flipud", .type = T::real, .default_value = "0.0", .group = "augmentation",
     .help = "probability of a vertical flip", .commands = train_data, .minimum = 0, .maximum = 1, .support = S::honoured},
    {.name = "degrees", .type = T::real, .default_value = "10.0", .group = "augmentation",
     .help = "random rotation range in degrees (+/-)", .commands = train_data, .minimum = 0, .maximum = 180, .support = S::honoured},
    {.name = "translate", .type = T::real, .default_value = "0.1", .group = "augmentation",
     .help = "random translation as a fraction of the image size (+/-)", .commands = train_data, .minimum = 0, .maximum = 1, .support = S::honoured},
    {.name = "shear", .type = T::real, .default_value = "2.0", .group = "augmentation",
     .help = "random shear range in degrees (+/-)", .commands = train_data, .minimum = 0, .maximum = 45, .support = S::honoured},
    {.name = "perspective", .type = T::real, .default_value = "0.0", .group = "augmentation",
     .help = "random perspective (+/-), 0 to 0.001 is sensible", .commands = train_data, .minimum = 0, .maximum = 1, .support = S::honoured},
    {.name = "mosaic_scale", .type = T::real_pair, .default_value = "(0.1,2.0)", .group = "augmentation",
     .help = "scale range of the affine step after mosaic", .commands = train_data, .minimum = 0.01, .maximum = 10, .support = S::honoured},
    {.name = "mixup_scale", .type = T::real_pair, .default_value = "(0.5,1.5)", .group = "augmentation",
     .help = "scale jitter of the mixup partner", .commands = train_data, .minimum = 0.01, .maximum = 10, .support = S::honoured},
    {.name = "copy_paste", .type = T::real, .default_value = "0.0", .group = "augmentation",
     .help = "probability of copy-paste; not supported (needs segment labels): only 0 is accepted", .commands = train_data, .minimum = 0, .maximum = 1, .support = S::refused,
     .why = "copy-paste needs segment (polygon) labels, and only box labels are read"},
    {.name = "rot90", .type = T::real, .default_value = "0.0", .group = "augmentation",
     .help = "probability of a random 90-degree rotation; LibreYOLO applies it to oriented-box (OBB) samples only, so "
             "detection training runs without it (one log line)", .commands = train_data, .minimum = 0, .maximum = 1,
     .support = S::logged, .why = "rot90 turns oriented-box (OBB) samples only, as in LibreYOLO; detection samples are not rotated"},
    {.name = "no_aug_epochs", .type = T::integer, .default_value = "15", .group = "augmentation",
     .help = "last N epochs run without mosaic/mixup (YOLOX also turns its L1 loss on)", .commands = train_data, .minimum = 0,
     .maximum = 1e6, .support = S::honoured},
    {.name = "aug_stop_epoch_ratio", .type = T::real, .default_value = "1.0", .group = "augmentation",
     .help = "share of the epochs with the strong augmentations (mosaic/mixup; D-FINE's and DEIM's photometric, zoom-out "
             "and IoU crop) and D-FINE's listed multi-scale sizes: below 1 they stop at int(epochs x ratio), and at the "
             "latest where the no_aug_epochs begin (but after one epoch), as LibreYOLO's DETR trainers",
     .commands = train_data, .minimum = 0, .maximum = 1, .support = S::honoured},
    {.name = "max_labels", .type = T::integer, .default_value = "300", .group = "augmentation",
     .help = "most boxes kept per training image (and the label slots of a captured loss: cuda_graph_scope=loss and up)", .commands = train_data, .minimum = 1, .maximum = 100000, .support = S::honoured},

    // --- loss: every loss key is a family's own (Family::options())

    // --- EMA
    {.name = "ema", .type = T::boolean, .default_value = "true", .group = "ema",
     .help = "keep an exponential moving average of the weights (validated and saved)", .support = S::honoured},
    {.name = "ema_decay", .type = T::real, .default_value = "0.9998", .group = "ema",
     .help = "EMA decay d in d*(1-exp(-updates/tau))", .minimum = 0, .maximum = 1, .support = S::honoured},
    {.name = "ema_tau", .type = T::real, .default_value = "2000", .group = "ema",
     .help = "EMA ramp tau in updates (<= 0: constant decay)", .minimum = -unbounded, .maximum = unbounded, .support = S::honoured},

});

}  // namespace

std::span<const OptionSpec> recipe_keys() { return kKeys; }

}  // namespace libreyolo::config::keys
