#include "core/option_table.h"

#include <array>

namespace libreyolo::config {

namespace {

using T = ValueType;
using S = Support;
constexpr unsigned train = command_train;
constexpr unsigned train_val = command_train | command_val;
constexpr unsigned train_profile = command_train | command_profile;
constexpr unsigned run_model = command_train | command_val | command_predict | command_profile;
constexpr unsigned train_data = command_train | command_data;  // training keys `libreyolo data preview|bench` use too
constexpr double unbounded = 1e12;

// Keys and defaults follow LibreYOLO's trainer (CLI keys plus the TrainConfig fields);
// each family's own values come with the family (lib/models/<family>/recipe.cpp).
constexpr auto kOptions = std::to_array<OptionSpec>({
    // --- model / data
    {.name = "model", .type = T::text, .default_value = "yolox-s", .group = "model/data",
     .help = "model name (yolo9-t/s/m/c, yolox-n/t/s/m/l/x, yolov5n/s/m/l/x or yolov5s.yaml, yolo7-b, rtmdet-t/s/m/l/x, rtdetr-r18/r34/r50/r50m/r101/l/x, "
             "dfine-n/s/m/l/x, deim-n/s/m/l/x, rtdetrv4-s/m/l/x), LibreYOLO weights name (LibreYOLO9t.pt) or a checkpoint path",
     .commands = run_model | command_data | command_info, .support = S::honoured},
    {.name = "data", .type = T::text, .default_value = "", .group = "model/data",
     .help = "dataset YAML path or built-in name (coco8, coco128, coco); required for train and val",
     .commands = train_val | command_profile | command_data, .support = S::honoured},
    {.name = "task", .type = T::choice, .default_value = "detect", .group = "model/data",
     .help = "task of the model", .commands = run_model, .choices = "detect", .support = S::honoured},
    {.name = "pretrained", .type = T::flag_or_path, .default_value = "true", .group = "model/data",
     .help = "true: start from the weights model= names (a .pt file); false: train its architecture from scratch; "
             "a path: load those weights by name and shape into the model (the count that matched is logged)",
     .commands = train, .support = S::honoured},
    {.name = "allow_download_scripts", .type = T::boolean, .default_value = "false", .group = "model/data",
     .help = "allow a data YAML's `download` script; not supported (nothing is ever downloaded): only false is accepted", .commands = train_val, .support = S::refused,
     .why = "datasets are never downloaded: fetch them yourself and point data= at them"},
    {.name = "single_cls", .type = T::boolean, .default_value = "false", .group = "model/data",
     .help = "train as a one-class detector", .commands = train_val, .support = S::honoured},
    {.name = "cfg", .type = T::text, .default_value = "", .group = "model/data",
     .help = "YAML file of key: value overrides, applied before the command line", .commands = run_model, .support = S::honoured},

    // --- loop
    {.name = "epochs", .type = T::integer, .default_value = "300", .group = "loop",
     .help = "number of training epochs", .minimum = 1, .maximum = 1e6, .support = S::honoured},
    {.name = "batch", .type = T::integer, .default_value = "16", .group = "loop",
     .help = "global batch size (all devices together); -1 (AutoBatch) is not built yet and is refused",
     .commands = train_val | command_profile | command_data, .minimum = -1, .maximum = 1e6, .support = S::honoured},
    {.name = "imgsz", .type = T::image_size, .default_value = "640", .group = "loop",
     .help = "input size: 640 or HxW such as 480x640 (training and validation use the longer side); a side that is not a multiple of 32 is rounded up (33 -> 64), with a warning", .commands = run_model | command_data | command_info, .minimum = 32, .maximum = 8192, .support = S::honoured},
    {.name = "device", .type = T::text, .default_value = "auto", .group = "loop",
     .help = "auto, cpu or a CUDA index (0, cuda:1); for train a list (0,1) starts one data-parallel process per GPU",
     .commands = run_model, .support = S::honoured},
    {.name = "workers", .type = T::integer, .default_value = "4", .group = "loop",
     .help = "data loader worker threads", .commands = train_val | command_profile | command_data, .minimum = 0,
     .maximum = 1024, .support = S::honoured},
    {.name = "cache", .type = T::choice, .default_value = "false", .group = "loop",
     .help = "cache resized images: false, ram (true; data-parallel processes on a machine share one copy) or disk",
     .commands = train_val | command_data,
     .choices = "false ram disk", .synonyms = "true=ram 1=ram yes=ram 0=false no=false none=false =false", .support = S::honoured},
    {.name = "min_samples", .type = T::integer, .default_value = "0", .group = "loop",
     .help = "epoch floor for tiny datasets: an epoch draws this many images with replacement when the dataset has "
             "fewer (0 = off)", .minimum = 0, .maximum = unbounded, .support = S::honoured},
    {.name = "class_balanced", .type = T::boolean, .default_value = "false", .group = "loop",
     .help = "draw images with replacement by LVIS repeat factors: classes in fewer images than the median class "
             "repeat (median/frequency)^0.5 times", .support = S::honoured},
    {.name = "average_best", .type = T::integer, .default_value = "0", .group = "loop",
     .help = "average the N best validated EMA snapshots (by best_metric) into weights/average.pt at the end, validated "
             "(0 = off); the pool is kept in weights/average_pool.pt for resume", .minimum = 0, .maximum = 1000,
     .support = S::honoured},
    {.name = "export_check", .type = T::boolean, .default_value = "false", .group = "loop",
     .help = "check that the final model exports; not supported: only false is accepted", .support = S::refused,
     .why = "model export is not supported"},
    {.name = "precise_bn", .type = T::integer, .default_value = "0", .group = "loop",
     .help = "recompute BatchNorm statistics of the trained and EMA models from N training images before the final "
             "validation (0 = off)", .minimum = 0, .maximum = unbounded, .support = S::honoured},
    {.name = "seed", .type = T::integer, .default_value = "0", .group = "loop",
     .help = "random seed of the weights, the data order and the augmentation", .commands = train_data, .minimum = 0, .maximum = 4294967295.0, .support = S::honoured},
    {.name = "deterministic", .type = T::boolean, .default_value = "false", .group = "loop",
     .help = "deterministic kernels: cuDNN's deterministic convolutions (no autotuning), PyTorch's deterministic forms "
             "where it has them (others warn once) and a fixed cuBLAS workspace, so that a GPU run repeats; slower. "
             "Ultralytics' key (its default is true; LibreYOLO sets none)",
     .commands = train_profile, .support = S::honoured},
    {.name = "resume", .type = T::flag_or_path, .default_value = "false", .group = "loop",
     .help = "resume from model=.../last.pt (true) or from the given checkpoint path", .support = S::honoured},
    {.name = "amp", .type = T::boolean, .default_value = "true", .group = "loop",
     .help = "mixed precision (CUDA; on CPU only with amp_dtype=bfloat16)", .commands = run_model, .support = S::honoured},
    {.name = "amp_dtype", .type = T::choice, .default_value = "float16", .group = "loop",
     .help = "mixed-precision type: float16 (with a loss scaler) or bfloat16", .commands = run_model,
     .choices = "float16 bfloat16", .synonyms = "fp16=float16 half=float16 bf16=bfloat16", .support = S::honoured},
    {.name = "cuda_graph", .type = T::boolean, .default_value = "false", .group = "loop",
     .help = "capture the network's forward and backward in a CUDA graph on the 3rd batch of a shape (loss, optimizer and EMA "
             "stay eager); other shapes run eager, and a CPU device or a failed capture says so in one log line",
     .commands = train_profile, .support = S::honoured},
    {.name = "cuda_graph_scope", .type = T::choice, .default_value = "network", .group = "loop",
     .help = "with cuda_graph=true, what the graphs hold (each includes the one before): network = the forward and "
             "backward (LibreYOLO's boundary); loss = forward, loss and backward as one graph (YOLOv9, one process; targets "
             "padded to max_labels, the most boxes the pipeline keeps per image); optimizer = also the optimizer step as a second graph (unscale, clipping, the update, "
             "the loss scale; lr and momentum in device tensors); step = the EMA update in it too",
     .commands = train_profile, .choices = "network loss optimizer step", .support = S::honoured},
    {.name = "channels_last", .type = T::choice, .default_value = "auto", .group = "loop",
     .help = "convolution weights and images channels-last (NHWC) in training; auto = on for YOLOv9 on the CPU "
             "(oneDNN: 25% faster steps at 160 px, 4% at 640), off for YOLOX (17% slower at 640) and on CUDA",
     .commands = train_profile, .choices = "auto true false",
     .synonyms = "1=true yes=true on=true 0=false no=false off=false", .support = S::honoured},
    {.name = "compile", .type = T::boolean, .default_value = "false", .group = "loop",
     .help = "torch.compile; not supported (LibTorch has no compiler): only false is accepted", .support = S::refused,
     .why = "LibTorch has no graph compiler (torch.compile is Python-only)"},
    {.name = "lora", .type = T::boolean, .default_value = "false", .group = "loop",
     .help = "train low-rank adapters; not supported: only false is accepted", .support = S::refused,
     .why = "low-rank adapters are not supported"},
    {.name = "freeze", .type = T::text, .default_value = "", .group = "loop",
     .help = "freeze the first N layer groups (YOLOv9: 10 backbone, 6 neck, head; YOLOX: backbone, head), or a comma "
             "list of group indices and module names (backbone, neck.elan_up1): no gradient, no weight decay", .support = S::honoured},
    {.name = "sync_bn", .type = T::boolean, .default_value = "false", .group = "distributed",
     .help = "synchronised BatchNorm in data-parallel training: statistics over the global batch (single-process runs "
             "log one line)", .support = S::logged,
     .why = "single-process training has no other process to synchronise BatchNorm with"},
    {.name = "nproc_per_node", .type = T::integer, .default_value = "1", .group = "distributed",
     .help = "data-parallel processes on this machine, started by libreyolo itself (device=cpu nproc_per_node=2; "
             "device=0,1 implies 2); ignored under torchrun or srun, which start the processes",
     .commands = train, .minimum = 1, .maximum = 1024, .support = S::honoured},
    {.name = "nnodes", .type = T::integer, .default_value = "1", .group = "distributed",
     .help = "machines in a data-parallel run; start the same command on each with its node_rank", .commands = train,
     .minimum = 1, .maximum = 65536, .support = S::honoured},
    {.name = "node_rank", .type = T::integer, .default_value = "0", .group = "distributed",
     .help = "this machine's index among nnodes (0 holds rank 0 and the rendezvous)", .commands = train,
     .minimum = 0, .maximum = 65535, .support = S::honoured},
    {.name = "master_addr", .type = T::text, .default_value = "127.0.0.1", .group = "distributed",
     .help = "address of node 0, where rank 0 listens for the rendezvous", .commands = train, .support = S::honoured},
    {.name = "master_port", .type = T::integer, .default_value = "0", .group = "distributed",
     .help = "rendezvous port on node 0; 0 = a free port on one machine, 29500 across machines", .commands = train,
     .minimum = 0, .maximum = 65535, .support = S::honoured},
    {.name = "dist_backend", .type = T::choice, .default_value = "auto", .group = "distributed",
     .help = "collectives: auto (NCCL on CUDA, Gloo on the CPU), nccl or gloo", .commands = train,
     .choices = "auto nccl gloo", .support = S::honoured},
    {.name = "dist_timeout", .type = T::integer, .default_value = "1800", .group = "distributed",
     .help = "seconds the rendezvous and each collective may wait for the other processes before the run fails",
     .commands = train, .minimum = 1, .maximum = 604800, .support = S::honoured},
    {.name = "multi_scale", .type = T::boolean, .default_value = "false", .group = "loop",
     .help = "resize each batch to a random multiple of 32 in [0.5, 1.5] x imgsz (Ultralytics' range)", .support = S::honoured},
    {.name = "nbs", .type = T::integer, .default_value = "none", .group = "loop",
     .help = "nominal batch size: accumulate gradients over round(nbs/batch) batches (none = off; yolov5: 64, "
             "the window growing from 1 over the warm-up and weight_decay x batch*accumulate/nbs, as its train.py)",
     .minimum = 1, .maximum = 1e6, .nullable = true, .support = S::honoured},
    {.name = "clip_max_norm", .type = T::real, .default_value = "0.0", .group = "loop",
     .help = "clip the gradient norm to this value (0 = off)", .minimum = 0, .maximum = unbounded, .support = S::honoured},

    // --- distillation
    {.name = "distill_model", .type = T::text, .default_value = "", .group = "distill",
     .help = "teacher checkpoint for knowledge distillation; not supported: only empty is accepted", .support = S::refused,
     .why = "knowledge distillation is not supported"},
    {.name = "dis", .type = T::real, .default_value = "none", .group = "distill",
     .help = "distillation loss weight; not supported: only none is accepted", .minimum = 0, .maximum = unbounded,
     .nullable = true, .support = S::refused,
     .why = "knowledge distillation is not supported"},
    {.name = "distill_loss_type", .type = T::choice, .default_value = "mgd", .group = "distill",
     .help = "distillation loss; not supported: only mgd (the default) is accepted", .choices = "mgd cwd", .support = S::refused,
     .why = "knowledge distillation is not supported"},

    // --- optimizer
    {.name = "optimizer", .type = T::choice, .default_value = "sgd", .group = "optimizer",
     .help = "optimizer: sgd (nesterov), adam or adamw", .choices = "sgd adam adamw", .support = S::honoured},
    {.name = "lr0", .type = T::real, .default_value = "0.01", .group = "optimizer",
     .help = "initial (peak) learning rate", .minimum = 0, .maximum = 1, .support = S::honoured},
    {.name = "lr_backbone", .type = T::real, .default_value = "0.0", .group = "optimizer",
     .help = "learning rate of a DETR's backbone (its groups train at lr_backbone / lr0 of the schedule's rate; 0: lr0's); "
             "the YOLO families have no such group", .minimum = 0, .maximum = 1, .support = S::honoured},
    {.name = "backbone_lr_mult", .type = T::real, .default_value = "1.0", .group = "optimizer",
     .help = "learning-rate multiple of a D-FINE or DEIM backbone's groups (LibreYOLO's fine-tune recipe: 0.5); "
             "RT-DETR sets its backbone's rate with lr_backbone", .minimum = 0, .maximum = 10, .support = S::honoured},
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

    // --- loss
    {.name = "box", .type = T::real, .default_value = "7.5", .group = "loss",
     .help = "box (CIoU) loss gain (YOLOv9; YOLOv5's hyp box, scaled by 3 / levels)", .minimum = 0, .maximum = 1000, .support = S::honoured},
    {.name = "cls", .type = T::real, .default_value = "0.5", .group = "loss",
     .help = "classification (BCE) loss gain (YOLOv9; YOLOv5's hyp cls, scaled by classes / 80)", .minimum = 0, .maximum = 1000, .support = S::honoured},
    {.name = "obj", .type = T::real, .default_value = "1.0", .group = "loss",
     .help = "YOLOv5: objectness (BCE) loss gain, scaled by (imgsz / 640)^2 as its train.py does", .minimum = 0, .maximum = 1000, .support = S::honoured},
    {.name = "autoanchor", .type = T::boolean, .default_value = "true", .group = "loss",
     .help = "YOLOv5: before training, measure the anchors' best possible recall on the training labels and, at 0.98 or less, evolve new ones (k-means, then a genetic search) and keep them if they fit better (yolov5's --noautoanchor is autoanchor=false)", .support = S::honoured},
    {.name = "anchor_t", .type = T::real, .default_value = "4.0", .group = "loss",
     .help = "YOLOv5: a box matches an anchor while neither side is more than anchor_t times the anchor's or less than 1/anchor_t (also AutoAnchor's threshold)", .minimum = 1, .maximum = 100, .support = S::honoured},
    {.name = "dfl", .type = T::real, .default_value = "1.5", .group = "loss",
     .help = "distribution focal loss gain (YOLOv9)", .minimum = 0, .maximum = 1000, .support = S::honoured},
    {.name = "aux_weight", .type = T::real, .default_value = "0.25", .group = "loss",
     .help = "YOLOv9: weight of the PGI auxiliary branch's losses, trained beside the main head (0 = no branch)", .minimum = 0, .maximum = 1000, .support = S::honoured},

    // --- EMA
    {.name = "ema", .type = T::boolean, .default_value = "true", .group = "ema",
     .help = "keep an exponential moving average of the weights (validated and saved)", .support = S::honoured},
    {.name = "ema_decay", .type = T::real, .default_value = "0.9998", .group = "ema",
     .help = "EMA decay d in d*(1-exp(-updates/tau))", .minimum = 0, .maximum = 1, .support = S::honoured},
    {.name = "ema_restart_decay", .type = T::real, .default_value = "0.0", .group = "ema",
     .help = "where the no_aug_epochs begin, the EMA turns to this constant decay, without the ramp (LibreYOLO's D-FINE and DEIM "
             "'EMA restart'; 0: never)", .minimum = 0, .maximum = 1, .support = S::honoured},
    {.name = "ema_tau", .type = T::real, .default_value = "2000", .group = "ema",
     .help = "EMA ramp tau in updates (<= 0: constant decay)", .minimum = -unbounded, .maximum = unbounded, .support = S::honoured},

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
    {.name = "best_metric", .type = T::choice, .default_value = "metrics/mAP50-95", .group = "validation",
     .help = "metric that selects best.pt and drives patience", .commands = train,
     .choices = "metrics/mAP50-95 metrics/mAP50 metrics/mAP75 metrics/precision metrics/recall",
     .synonyms = "map50-95=metrics/mAP50-95 map50=metrics/mAP50 map75=metrics/mAP75 precision=metrics/precision "
                 "recall=metrics/recall", .support = S::honoured},
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
     .help = "output: the folder `data synth` writes, the image `data preview` writes", .commands = command_data, .support = S::honoured},
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

constexpr auto kAliases = std::to_array<Alias>({
    {"lrf", "min_lr_ratio"},
    {"close_mosaic", "no_aug_epochs"},
    {"fliplr", "flip_prob"},
    {"hsv_h", "hsv_hue"},
    {"hsv_s", "hsv_saturation"},
    {"hsv_v", "hsv_value"},
    {"mosaic_prob", "mosaic"},
    {"mixup_prob", "mixup"},
    {"plots", "save_plots"},
    {"scale", "mosaic_scale", AliasKind::symmetric_range},
    {"cos_lr", "scheduler", AliasKind::bool_to_choice, "cos"},
});

}  // namespace

std::span<const OptionSpec> option_table() { return kOptions; }
std::span<const Alias> aliases() { return kAliases; }

const OptionSpec* find_option(std::string_view name) {
  for (const auto& spec : kOptions) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

const Alias* find_alias(std::string_view name) {
  for (const auto& alias : kAliases) {
    if (alias.alias == name) return &alias;
  }
  return nullptr;
}

std::string_view command_name(Command command) {
  switch (command) {
    case command_train: return "train";
    case command_val: return "val";
    case command_predict: return "predict";
    case command_profile: return "profile";
    case command_data: return "data";
    case command_info: return "info";
  }
  return "?";
}

std::string_view type_name(ValueType type) {
  switch (type) {
    case ValueType::boolean: return "bool";
    case ValueType::integer: return "int";
    case ValueType::real: return "float";
    case ValueType::text: return "str";
    case ValueType::choice: return "choice";
    case ValueType::real_pair: return "(float,float)";
    case ValueType::image_size: return "int|HxW";
    case ValueType::flag_or_path: return "bool|path";
  }
  return "?";
}

}  // namespace libreyolo::config
