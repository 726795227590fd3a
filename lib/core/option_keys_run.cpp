// The option table's model, data, loop and distillation keys (core/option_keys.h).
#include "core/option_keys.h"

#include <array>

namespace libreyolo::config::keys {

namespace {

// Keys and defaults follow LibreYOLO's trainer (CLI keys plus the TrainConfig fields);
// each family's own values come with the family (lib/models/<family>/recipe.cpp).
constexpr auto kKeys = std::to_array<OptionSpec>({
    // --- model / data
    // Its default and the registered names in its help come from the model layer (models::option_table()).
    {.name = "model", .type = T::text, .default_value = "", .group = "model/data",
     .help = "model name (family-size), LibreYOLO weights name (LibreYOLO9t.pt) or a checkpoint path",
     .commands = run_model | command_data | command_info, .support = S::honoured},
    {.name = "data", .type = T::text, .default_value = "", .group = "model/data",
     .help = "dataset YAML path or built-in name (coco8, coco128, coco); required for train and val",
     .commands = train_val | command_profile | command_data, .support = S::honoured},
    {.name = "task", .type = T::choice, .default_value = "detect", .group = "model/data",
     .help = "task of the model: what its data holds, how it is validated and what predict writes (detect: boxes; "
             "classify: a class per image); implied by the model",
     .commands = run_model | command_data, .choices = "detect classify",
     .synonyms = "classification=classify class=classify cls=classify detection=detect", .support = S::honoured},
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
     .help = "nominal batch size: accumulate gradients over round(nbs/batch) batches (none = off; a family's recipe may "
             "set it, and YOLOv5's grows the window from 1 over the warm-up with weight_decay x batch*accumulate/nbs, as its train.py)",
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

});

}  // namespace

std::span<const OptionSpec> run_keys() { return kKeys; }

}  // namespace libreyolo::config::keys
