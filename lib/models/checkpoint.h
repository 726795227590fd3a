// LibreYOLO checkpoints (schema v1.0): a torch.save dict with the model state dict under
// `model` and the metadata LibreYOLO requires (schema_version, libreyolo_version, model_family,
// size, task, nc, names, imgsz), plus training extras (epoch, optimizer, ema, ...) kept as read.
// Also `model=` resolution: from-scratch names, checkpoint paths and LibreYOLO weight names.
#pragma once

#include "core/config.h"
#include "models/model.h"
#include "models/safetensors.h"

#include <ATen/core/ivalue.h>

#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace libreyolo::models {

inline constexpr const char* kCheckpointSchema = "1.0";

struct Checkpoint {
  std::string family;            // "yolo9", "yolox"
  std::string size;              // "t", "s", ...
  std::string task = "detect";
  int class_count = 80;
  std::vector<std::string> names;  // index = class id
  int image_size = 640;
  std::string schema_version = kCheckpointSchema;
  std::string libreyolo_version;   // of the writer
  NamedTensors model;              // state dict with LibreYOLO's names, file order
  std::vector<std::pair<std::string, c10::IValue>> extras;  // every other key, in file order

  const c10::IValue* extra(const std::string& key) const;
  void set_extra(const std::string& key, c10::IValue value);
};

// A state dict as a checkpoint value ({name: tensor} in order, as `train_model` holds it) and back;
// a value that is not a dict gives no tensors.
c10::IValue tensor_dict(const NamedTensors& tensors);
NamedTensors tensors_of(const c10::IValue& dict);

// The name of the first floating tensor holding a NaN or an infinity, if any (one device-to-host read).
std::optional<std::string> first_non_finite(const NamedTensors& tensors);
// The training configuration a checkpoint carries (`config`), each value as text a key=value
// would give it ("true", "300", "0.01", "(0.1,2.0)", "none"): from LibreYOLO's typed values and
// from the strings our checkpoints held before they were typed alike. Empty without one.
std::map<std::string, std::string> saved_training_config(const Checkpoint& checkpoint);

// The first NaN or infinity of a checkpoint's optimizer state ("state[17].momentum_buffer",
// "param_groups[0].lr"), if any.
std::optional<std::string> first_non_finite_optimizer_state(const c10::IValue& optimizer);

// COCO's 80 names for nc=80, else class_0 … class_{nc-1} (LibreYOLO's build_class_names).
std::vector<std::string> default_class_names(int class_count);

// Reads a .pt (torch.save) or .safetensors file. A .pt must be a dict with a `model` state
// dict; schema metadata missing from an older file is filled in from the state dict and
// `fallback` (family/size from the file name) with a warning. DDP `module.` prefixes are
// stripped. Throws ModelError naming the file, also where a tensor of its weights (`model`, or the
// raw `train_model`) holds a NaN or an infinity: such weights would train or predict nothing.
Checkpoint read_checkpoint(const std::filesystem::path& path, const ModelName& fallback = {});

// torch.save format, atomically; readable by torch.load (weights_only too) and LibreYOLO. A
// .safetensors path gets the weights plus the metadata (no training extras).
void write_checkpoint(const std::filesystem::path& path, const Checkpoint& checkpoint);

// Where `model=NAME.pt` is: as given, else weights/NAME.pt for a bare file name. Throws the
// missing-weights ModelError (exit 4, naming huggingface.co/LibreYOLO) when neither exists.
std::filesystem::path resolve_weights_path(const std::string& spec, const ModelName& name);

// Family and size of `model=` without building anything: from the name, or for a weights file
// from its metadata (tensors not read), its file name or its state-dict key names.
ModelName identify_model(const std::string& spec);

// The configuration of a command from its arguments, with the family defaults of the model
// that `model=` names (config::Config::from_arguments with identify_model).
config::Config parse_arguments(config::Command command, std::span<const std::string> arguments);

// A built model plus where its weights came from.
struct LoadedModel {
  Model model;
  ModelName name;                 // family and size
  int class_count = 80;
  std::vector<std::string> names; // from the checkpoint, else empty
  std::filesystem::path weights;  // empty when built from scratch
  int image_size = 0;             // the checkpoint's imgsz (0 when built from scratch)
  int class_hidden = 0;           // YOLOv9's class-tower width, for rebuilding (build_model)
  bool fine_tune = false;         // built in the family's form for training from weights (build_model)
  std::string task = "detect";    // the task its checkpoint was trained for (eval::task_named)
};

// `model=` as users write it: yolo9-s / yolox-s (from scratch with `class_count` classes), a
// path to a .pt / .safetensors file, or a LibreYOLO weight name (LibreYOLO9s.pt), looked up as
// given and then under weights/. A missing file is a ModelError (exit 4) saying where the
// official weights are published. With `checkpoint`, a weights file's contents (extras included)
// are handed back too, so callers need not read it again.
// `note_dropped`: log that training-only tensors (YOLOv9's PGI branch) were not loaded; a
// resumed training, which restores them itself, says false.
LoadedModel load_model(const std::string& spec, int class_count, std::optional<Checkpoint>* checkpoint = nullptr,
                       bool note_dropped = true);

}  // namespace libreyolo::models
