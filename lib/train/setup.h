// Training setup: from a resolved Config to everything the loop works on (device, data and
// loaders, model and EMA, optimizer groups, schedule, AMP and the loss scaler, validator, the
// family's loss). On resume it also restores the train state, weights, optimizer, scaler and RNG.
#pragma once

#include "core/config.h"
#include "data/dataset.h"
#include "data/batch_source.h"
#include "data/training_data.h"
#include "eval/task.h"
#include "eval/validator.h"
#include "models/checkpoint.h"
#include "models/family.h"
#include "train/amp.h"
#include "train/collectives.h"
#include "train/cuda_graph.h"
#include "train/ema.h"
#include "train/freeze.h"
#include "train/schedule.h"
#include "train/train_state.h"

#include <c10/core/Device.h>
#include <torch/optim/optimizer.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace libreyolo::train {

// Training is split along the seams of the loop: each stage and helper takes the parts it uses
// (the step runner: the network, optimisation, precision and graphs; the loader: the inputs),
// and set_up_training fills them in that order.

// Where the run happens and how its work is shared between processes.
struct Placement {
  // The other ranks of a data-parallel run; null in a single process.
  Collectives* dist = nullptr;
  c10::Device device = c10::kCPU;
  std::uint64_t seed = 0;
  int batch_size = 1;    // this process's share of the global batch
  int global_batch = 1;  // batch=
  int workers = 0;
  bool resume = false;
  std::shared_ptr<void> determinism{};  // deterministic=true: restores the process's kernel choices when it goes
  int rank() const { return dist ? dist->rank() : 0; }
  int world_size() const { return dist ? dist->world_size() : 1; }
  bool main_process() const { return rank() == 0; }  // the one that writes files and the console
};

// What the network is trained and validated on.
struct Inputs {
  data::TrainingData data;
  std::unique_ptr<eval::TaskTypes::Dataset> val_dataset;
  std::unique_ptr<data::BatchSource> loader;  // the task's (eval::Task::make_loader)
  int class_count = 0;
  int image_size = 640;
  bool multi_scale = false;
  // the family's multi_scale sizes (nullopt: Ultralytics' range) and the epoch they stop at
  std::optional<models::Family::BatchScales> batch_scales;
  int augmentation_stop_epoch = 0;  // the first epoch without the strong augmentations and listed scales
  // The epoch where the no-augmentation epochs begin and the EMA turns to a constant decay
  // (the families' ema_restart_decay key; -1: never), as LibreYOLO's D-FINE and DEIM trainers do.
  int ema_restart_epoch = -1;
  double ema_restart_decay = 0;
};

// The trained network, its family, EMA and loss.
struct Network {
  const models::Family* family = nullptr;
  models::LoadedModel loaded;        // the trained model and its name
  bool use_branch = false;           // the model's training-only branch trains beside it (Family::trains_branch)
  bool channels_last = false;
  FrozenLayers frozen;               // freeze=
  std::unique_ptr<ModelEma> ema;     // null with ema=false
  models::Model ema_model;
  std::unique_ptr<models::TrainingLoss> loss;

  models::Model& model() { return loaded.model; }
  const models::Model& model() const { return loaded.model; }
  // The trained model in train mode (frozen BatchNorm layers stay in eval mode).
  void set_train_mode() { frozen.set_train_mode(*loaded.model.module); }
  // The weights that are validated and saved: the EMA's when there is one.
  models::Model& evaluated_model() { return ema ? ema_model : loaded.model; }
};

// The optimizer and what steers it.
struct Optimisation {
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  std::optional<Schedule> schedule;
  std::vector<double> lr_multipliers;  // each optimizer group's share of the schedule's rate (empty: all 1)
  double lr_scale = 1.0;  // the schedule's multiplier: halved by each divergence recovery, kept in checkpoints
  double clip = 0;        // clip_max_norm (0: off)
  // warmup_bias_lr: the bias group (pg2) warms up from this rate instead (0: like the others)
  std::optional<std::size_t> bias_group;
  double warmup_bias_lr = 0;
  // Sets the learning rate and momentum for optimizer step `iteration`.
  void apply_schedule(std::int64_t iteration);
};

// Mixed precision.
struct Precision {
  bool autocast = false;
  c10::ScalarType amp_dtype = c10::kHalf;
  // float32's time over bfloat16's for a convolution on this CPU (measure_cpu_bf16_speedup), measured
  // when a CPU run asks for bfloat16 or is profiled on a CPU with bfloat16 instructions
  std::optional<double> cpu_bf16_speedup;
  std::unique_ptr<GradScaler> scaler;
};

// cuda_graph=true's graphs; both null: eager.
struct Graphs {
  std::shared_ptr<void> stream{};  // use_capture_stream's guard on a CUDA device; first, so that it goes last
  std::unique_ptr<GraphManager> training;     // on a CUDA device (or the tests' capture backend)
  std::unique_ptr<InferenceGraphs> validation;
  std::int64_t label_slots = 0;  // targets padded to this many slots per image (a captured loss); 0: as many as needed
};

struct Training {
  Training(const config::Config& config, Collectives* dist) : config(config), task(&eval::task_of(config)) { place.dist = dist; }
  const config::Config& config;
  const eval::Task* task;  // task=: the data it reads, its validator, metrics and best metric
  Placement place;
  Inputs inputs;
  Network net;
  Optimisation optim;
  Precision precision;
  Graphs graphs;
  std::unique_ptr<eval::Validator> validator;  // null without validation
  std::optional<models::Checkpoint> checkpoint;  // the file a resumed run continues from
};

// Builds the training and fills `state` (epochs, batches, accumulation; the position and best
// metric when resuming). Throws the library's errors for bad keys, data or weights.
// `dist`: the other ranks of a data-parallel run (null: one process).
std::unique_ptr<Training> set_up_training(const config::Config& config, TrainState& state, Collectives* dist = nullptr);

// A checkpoint of this run back into the training: with `weights`, train_model into the model and
// model into the EMA; the EMA's update count, optimizer, loss scaler and train state always.
void load_run_state(Training& training, TrainState& state, const models::Checkpoint& checkpoint, bool weights);

// One log line for each key the user set that is accepted but not acted on (Support::logged),
// saying why: "rot90=0.5 ignored (...); training runs without it".
void log_ignored_keys(const config::Config& config, bool distributed = false);

// device= as users write it: auto (first GPU, else CPU), cpu, 0, cuda:1. A list (0,1) is for the
// data-parallel launcher, which gives each process the list's `local_rank`-th entry; a single
// process refuses one. Throws UsageError for a missing GPU.
c10::Device resolve_device(const std::string& text, std::optional<int> local_rank = std::nullopt);

// The devices device= names: {"0", "1"} for "0,1", {text} otherwise.
std::vector<std::string> device_list(const std::string& text);

// batch= split over `world_size` processes; UsageError unless it divides (Ultralytics' check).
int per_rank_batch(int batch, int world_size);

}  // namespace libreyolo::train
