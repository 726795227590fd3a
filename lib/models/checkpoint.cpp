#include "models/checkpoint.h"

#include "core/error.h"
#include "core/log.h"
#include "models/torch_file.h"
#include "core/checked_size.h"
#include "models/family.h"

#include "build_config.h"

#include <ATen/ATen.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <fmt/format.h>

#include <algorithm>

#include <charconv>
#include <cmath>

#include <array>
#include <map>

namespace libreyolo::models {

namespace {

constexpr std::array<const char*, 80> kCocoNames = {
    "person",        "bicycle",      "car",          "motorcycle",    "airplane",     "bus",
    "train",         "truck",        "boat",         "traffic light", "fire hydrant", "stop sign",
    "parking meter", "bench",        "bird",         "cat",           "dog",          "horse",
    "sheep",         "cow",          "elephant",     "bear",          "zebra",        "giraffe",
    "backpack",      "umbrella",     "handbag",      "tie",           "suitcase",     "frisbee",
    "skis",          "snowboard",    "sports ball",  "kite",          "baseball bat", "baseball glove",
    "skateboard",    "surfboard",    "tennis racket", "bottle",       "wine glass",   "cup",
    "fork",          "knife",        "spoon",        "bowl",          "banana",       "apple",
    "sandwich",      "orange",       "broccoli",     "carrot",        "hot dog",      "pizza",
    "donut",         "cake",         "chair",        "couch",         "potted plant", "bed",
    "dining table",  "toilet",       "tv",           "laptop",        "mouse",        "remote",
    "keyboard",      "cell phone",   "microwave",    "oven",          "toaster",      "sink",
    "refrigerator",  "book",         "clock",        "vase",          "scissors",     "teddy bear",
    "hair drier",    "toothbrush"};

const char* const kRequired[] = {"model", "schema_version", "libreyolo_version", "model_family", "size",
                                 "task",  "nc",             "names",             "imgsz"};

[[noreturn]] void bad(const std::filesystem::path& path, const std::string& what) {
  throw ModelError(fmt::format("{}: {}", path.string(), what));
}

// A count from the file's metadata (nc, imgsz): a whole number in [low, high], or the file is refused.
int bounded(const std::filesystem::path& path, const char* key, const std::string& text, int low, int high) {
  int value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < low || value > high) {
    bad(path, fmt::format("metadata {}={} is not a whole number from {} to {}", key, text, low, high));
  }
  return value;
}

std::string strip_module_prefix(const std::string& name) {
  return name.rfind("module.", 0) == 0 ? name.substr(7) : name;
}

// Family from a state dict's key names when the file does not say: of the families that recognise
// one of its keys, the one of highest precedence (Family::key_precedence); none where two tie.
std::string family_from_keys(const NamedTensors& model) {
  const Family* found = nullptr;
  bool tied = false;
  for (const Family* f : families()) {
    const bool recognised = std::any_of(model.begin(), model.end(), [&](const auto& item) { return f->recognises_key(item.first); });
    if (!recognised) continue;
    if (found == nullptr || f->key_precedence() > found->key_precedence()) {
      found = f;
      tied = false;
    } else if (f->key_precedence() == found->key_precedence()) {
      tied = true;
    }
  }
  return found == nullptr || tied ? std::string() : std::string(found->name());
}

}  // namespace

const c10::IValue* Checkpoint::extra(const std::string& key) const {
  for (const auto& [name, value] : extras) {
    if (name == key) return &value;
  }
  return nullptr;
}

void Checkpoint::set_extra(const std::string& key, c10::IValue value) {
  for (auto& [name, existing] : extras) {
    if (name == key) {
      existing = std::move(value);
      return;
    }
  }
  extras.emplace_back(key, std::move(value));
}

std::vector<std::string> default_class_names(int class_count) {
  std::vector<std::string> names;
  for (int i = 0; i < class_count; ++i) {
    names.push_back(class_count == 80 ? std::string(kCocoNames[static_cast<std::size_t>(i)]) : fmt::format("class_{}", i));
  }
  return names;
}

Checkpoint read_checkpoint(const std::filesystem::path& path, const ModelName& fallback) {
  Checkpoint checkpoint;
  checkpoint.family = fallback.family;
  checkpoint.size = fallback.size;
  const std::string extension = path.extension().string();
  if (extension == ".safetensors") {
    for (auto& [name, tensor] : read_safetensors(path)) checkpoint.model.emplace_back(strip_module_prefix(name), tensor);
    // read_safetensors returns name order; metadata (family, size, nc) travels in the header
    const auto metadata = read_safetensors_metadata(path);
    const auto get = [&](const char* key) { auto it = metadata.find(key); return it == metadata.end() ? std::string() : it->second; };
    if (!get("model_family").empty()) checkpoint.family = get("model_family");
    if (!get("size").empty()) checkpoint.size = get("size");
    if (!get("nc").empty()) checkpoint.class_count = bounded(path, "nc", get("nc"), 1, kMaxClasses);
    if (!get("imgsz").empty()) checkpoint.image_size = bounded(path, "imgsz", get("imgsz"), kMinImageSize, kMaxImageSize);
    if (!get("task").empty()) checkpoint.task = get("task");
    if (!get("names").empty()) {
      try {
        checkpoint.names = nlohmann::json::parse(get("names")).get<std::vector<std::string>>();
      } catch (const nlohmann::json::exception&) {
        bad(path, "metadata `names` is not a JSON list of strings");
      }
    }
  } else {
    const c10::IValue file = read_torch_file(path);
    if (!file.isGenericDict()) bad(path, "a torch.save file that is not a dict; expected a LibreYOLO checkpoint");
    const auto dict = file.toGenericDict();
    // A bare state dict (every value a tensor) is accepted too.
    bool bare = dict.size() > 0;
    for (const auto& entry : dict) bare = bare && entry.value().isTensor();
    const auto model_value = bare ? file : (dict.contains("model") ? dict.at("model") : c10::IValue());
    if (!model_value.isGenericDict()) bad(path, "no `model` state dict in this checkpoint");
    for (const auto& entry : model_value.toGenericDict()) {
      if (!entry.key().isString()) bad(path, "a state-dict key that is not a string");
      if (!entry.value().isTensor()) continue;  // e.g. None placeholders
      checkpoint.model.emplace_back(strip_module_prefix(entry.key().toStringRef()), entry.value().toTensor());
    }
    std::vector<std::string> missing;
    if (!bare) {
      for (const char* key : kRequired) {
        if (!dict.contains(key)) missing.emplace_back(key);
      }
      const auto text = [&](const char* key, std::string& out) {
        if (dict.contains(key) && dict.at(key).isString()) out = dict.at(key).toStringRef();
      };
      text("schema_version", checkpoint.schema_version);
      text("libreyolo_version", checkpoint.libreyolo_version);
      text("model_family", checkpoint.family);
      text("size", checkpoint.size);
      text("task", checkpoint.task);
      if (dict.contains("nc") && dict.at("nc").isInt()) {
        checkpoint.class_count = bounded(path, "nc", std::to_string(dict.at("nc").toInt()), 1, kMaxClasses);
      }
      if (dict.contains("imgsz") && dict.at("imgsz").isInt()) {
        checkpoint.image_size = bounded(path, "imgsz", std::to_string(dict.at("imgsz").toInt()), kMinImageSize, kMaxImageSize);
      }
      if (dict.contains("names")) {
        const c10::IValue& names = dict.at("names");
        std::map<std::int64_t, std::string> by_index;
        if (names.isGenericDict()) {
          for (const auto& e : names.toGenericDict()) {
            if (e.key().isInt() && e.value().isString()) by_index[e.key().toInt()] = e.value().toStringRef();
          }
        } else if (names.isList()) {
          std::int64_t i = 0;
          for (const auto& v : names.toList().vec()) {
            by_index[i] = v.isString() ? v.toStringRef() : fmt::format("class_{}", i);
            ++i;
          }
        }
        if (by_index.size() > static_cast<std::size_t>(kMaxClasses)) {
          bad(path, fmt::format("{} class names, more than the {} libreyolo reads", by_index.size(), kMaxClasses));
        }
        for (const auto& [index, name] : by_index) {
          if (index != static_cast<std::int64_t>(checkpoint.names.size())) bad(path, "class names are not numbered 0..nc-1");
          checkpoint.names.push_back(name);
        }
      }
      for (const auto& entry : dict) {
        const std::string key = entry.key().isString() ? entry.key().toStringRef() : "";
        bool known = false;
        for (const char* k : kRequired) known = known || key == k;
        if (!known && !key.empty()) checkpoint.extras.emplace_back(key, entry.value());
      }
      if (checkpoint.schema_version != kCheckpointSchema) {
        log::warn("{}: checkpoint schema_version '{}' (libreyolo reads {}); loading what it can", path.string(),
                  checkpoint.schema_version, kCheckpointSchema);
      }
    }
    if (bare || !missing.empty()) {
      log::warn("{}: {} LibreYOLO checkpoint metadata ({}); family and size taken from the {}", path.string(),
                bare ? "a bare state dict without" : "legacy file missing",
                bare ? "schema v1.0" : fmt::format("{}", fmt::join(missing, ", ")),
                checkpoint.family.empty() ? "weights" : "file name");
    }
  }
  if (checkpoint.family.empty()) checkpoint.family = family_from_keys(checkpoint.model);
  if (checkpoint.family.empty() || checkpoint.size.empty()) {
    bad(path, "the checkpoint does not say its model family and size (model_family/size), and its name does not "
              "either; rename it LibreYOLO<FAMILY><size>.pt (e.g. LibreYOLO9s.pt) or re-save it with metadata");
  }
  if (checkpoint.names.empty()) checkpoint.names = default_class_names(checkpoint.class_count);
  if (static_cast<int>(checkpoint.names.size()) != checkpoint.class_count) {
    bad(path, fmt::format("nc is {} but {} class names are given", checkpoint.class_count, checkpoint.names.size()));
  }
  auto non_finite = first_non_finite(checkpoint.model);
  if (const auto* raw = checkpoint.extra("train_model"); !non_finite && raw) non_finite = first_non_finite(tensors_of(*raw));
  if (non_finite) {
    bad(path, fmt::format("tensor {} holds NaN or infinite values: these weights are unusable (a diverged training "
                          "saved them?); take an earlier checkpoint such as best.pt or epoch_N.pt", *non_finite));
  }
  if (const auto* optimizer = checkpoint.extra("optimizer")) {
    if (const auto state = first_non_finite_optimizer_state(*optimizer)) {
      bad(path, fmt::format("the optimizer's {} holds NaN or infinite values: resuming would diverge at once; resume from an "
                            "earlier checkpoint (epoch_N.pt), or train anew from its weights without resume=true",
                            *state));
    }
  }
  return checkpoint;
}

void write_checkpoint(const std::filesystem::path& path, const Checkpoint& checkpoint) {
  if (path.extension() == ".safetensors") {  // weights and metadata only; training extras need .pt
    write_safetensors(path, checkpoint.model,
                      {{"schema_version", checkpoint.schema_version},
                       {"libreyolo_version", LIBREYOLO_VERSION},
                       {"model_family", checkpoint.family},
                       {"size", checkpoint.size},
                       {"task", checkpoint.task},
                       {"nc", std::to_string(checkpoint.class_count)},
                       {"imgsz", std::to_string(checkpoint.image_size)},
                       {"names", nlohmann::json(checkpoint.names).dump()}});
    return;
  }
  c10::impl::GenericDict state(c10::StringType::get(), c10::TensorType::get());
  for (const auto& [name, tensor] : checkpoint.model) state.insert(name, tensor.detach().cpu().contiguous());
  c10::impl::GenericDict names(c10::IntType::get(), c10::StringType::get());
  for (std::size_t i = 0; i < checkpoint.names.size(); ++i) names.insert(static_cast<std::int64_t>(i), checkpoint.names[i]);
  c10::impl::GenericDict dict(c10::StringType::get(), c10::AnyType::get());
  dict.insert("model", state);
  dict.insert("schema_version", checkpoint.schema_version);
  dict.insert("libreyolo_version",
              checkpoint.libreyolo_version.empty() ? std::string(LIBREYOLO_VERSION) : checkpoint.libreyolo_version);
  dict.insert("model_family", checkpoint.family);
  dict.insert("size", checkpoint.size);
  dict.insert("task", checkpoint.task);
  dict.insert("nc", static_cast<std::int64_t>(checkpoint.class_count));
  dict.insert("names", names);
  dict.insert("imgsz", static_cast<std::int64_t>(checkpoint.image_size));
  for (const auto& [key, value] : checkpoint.extras) dict.insert(key, value);
  write_torch_file(path, dict);
}

std::filesystem::path resolve_weights_path(const std::string& spec, const ModelName& name) {
  std::filesystem::path path = spec;
  std::error_code error;
  if (!std::filesystem::exists(path, error) && !path.has_parent_path() &&
      std::filesystem::exists(std::filesystem::path("weights") / path, error)) {
    path = std::filesystem::path("weights") / path;
  }
  if (!std::filesystem::exists(path, error)) {
    const std::string looked = path.has_parent_path() ? path.string() : fmt::format("./{0} and weights/{0}", spec);
    const std::string scratch = name.family.empty() ? "yolo9-s" : name.family + "-" + name.size;
    throw ModelError(fmt::format(
        "{}: weights file not found (looked in {}). Official LibreYOLO weights are published at "
        "https://huggingface.co/LibreYOLO (libreyolo does not download them): put the file there or pass its path, "
        "or train from scratch with model={}",
        spec, looked, scratch));
  }
  return path;
}

ModelName identify_model(const std::string& spec) {
  ModelName name = parse_model_name(spec);
  if (!name.is_file) return name;
  const std::filesystem::path path = resolve_weights_path(spec, name);
  if (path.extension() == ".safetensors") {
    const auto metadata = read_safetensors_metadata(path);
    if (metadata.count("model_family") && metadata.count("size")) {
      name.family = metadata.at("model_family");
      name.size = metadata.at("size");
    }
    return name;
  }
  const c10::IValue file = read_torch_file(path, /*tensor_data=*/false);
  if (!file.isGenericDict()) return name;
  const auto dict = file.toGenericDict();
  if (dict.contains("model_family") && dict.at("model_family").isString() && dict.contains("size") &&
      dict.at("size").isString()) {
    name.family = dict.at("model_family").toStringRef();
    name.size = dict.at("size").toStringRef();
  }
  return name;
}

namespace {

std::optional<std::string> config_text(const c10::IValue& value) {
  if (value.isString()) return value.toStringRef();
  if (value.isBool()) return std::string(value.toBool() ? "true" : "false");
  if (value.isInt()) return std::to_string(value.toInt());
  if (value.isDouble()) return fmt::format("{}", value.toDouble());
  if (value.isNone()) return std::string("none");
  if (value.isList() || value.isTuple()) {
    std::vector<std::string> parts;
    for (const auto& element : value.isList() ? value.toListRef().vec() : value.toTupleRef().elements().vec()) {
      const auto part = config_text(element);
      if (!part) return std::nullopt;
      parts.push_back(*part);
    }
    return fmt::format("({})", fmt::join(parts, ","));
  }
  return std::nullopt;
}

}  // namespace

std::map<std::string, std::string> saved_training_config(const Checkpoint& checkpoint) {
  std::map<std::string, std::string> config;
  const auto* raw = checkpoint.extra("config");
  if (raw == nullptr || !raw->isGenericDict()) return config;
  for (const auto& entry : raw->toGenericDict()) {
    if (!entry.key().isString()) continue;
    if (auto text = config_text(entry.value())) config.emplace(entry.key().toStringRef(), std::move(*text));
  }
  return config;
}

std::optional<std::string> first_non_finite_optimizer_state(const c10::IValue& optimizer) {
  if (!optimizer.isGenericDict()) return std::nullopt;  // the loader says what is wrong with its shape
  const auto dict = optimizer.toGenericDict();
  if (dict.contains("param_groups") && dict.at("param_groups").isList()) {
    const auto groups = dict.at("param_groups").toList();
    for (std::size_t g = 0; g < groups.size(); ++g) {
      if (!groups.get(g).isGenericDict()) continue;
      for (const auto& entry : groups.get(g).toGenericDict()) {
        if (entry.value().isDouble() && !std::isfinite(entry.value().toDouble()) && entry.key().isString()) {
          return fmt::format("param_groups[{}].{}", g, entry.key().toStringRef());
        }
      }
    }
  }
  if (!dict.contains("state") || !dict.at("state").isGenericDict()) return std::nullopt;
  NamedTensors tensors;  // "state[17].momentum_buffer": the 18th parameter's
  for (const auto& parameter : dict.at("state").toGenericDict()) {
    if (!parameter.value().isGenericDict()) continue;
    const std::string index = parameter.key().isInt() ? std::to_string(parameter.key().toInt()) : "?";
    for (const auto& entry : parameter.value().toGenericDict()) {
      if (entry.value().isTensor() && entry.key().isString()) {
        tensors.emplace_back(fmt::format("state[{}].{}", index, entry.key().toStringRef()), entry.value().toTensor());
      }
    }
  }
  return first_non_finite(tensors);
}

std::optional<std::string> first_non_finite(const NamedTensors& tensors) {
  std::vector<at::Tensor> flags;
  std::vector<const std::string*> names;
  for (const auto& [name, tensor] : tensors) {
    if (!at::isFloatingType(tensor.scalar_type())) continue;
    flags.push_back(at::isfinite(tensor).all().to(at::kCPU));
    names.push_back(&name);
  }
  if (flags.empty()) return std::nullopt;
  const at::Tensor finite = at::stack(flags);
  if (finite.all().item<bool>()) return std::nullopt;
  return *names[static_cast<std::size_t>(finite.logical_not().nonzero()[0][0].item<std::int64_t>())];
}

c10::IValue tensor_dict(const NamedTensors& tensors) {
  c10::impl::GenericDict dict(c10::StringType::get(), c10::TensorType::get());
  for (const auto& [name, tensor] : tensors) dict.insert(name, tensor);
  return dict;
}

NamedTensors tensors_of(const c10::IValue& dict) {
  NamedTensors out;
  if (dict.isGenericDict()) {
    for (const auto& entry : dict.toGenericDict()) out.emplace_back(entry.key().toStringRef(), entry.value().toTensor());
  }
  return out;
}

config::Config parse_arguments(config::Command command, std::span<const std::string> arguments) {
  return config::Config::from_arguments(command, arguments, [](const std::string& model) {
    const ModelName name = identify_model(model);
    config::ModelIdentity identity{name.family, name.size, {}};
    if (!name.family.empty()) identity.defaults = recipe_defaults(family(name.family), name.size);
    return identity;
  }, option_table());
}

LoadedModel load_model(const std::string& spec, int class_count, std::optional<Checkpoint>* checkpoint_out, bool note_dropped) {
  const ModelName name = parse_model_name(spec);
  LoadedModel loaded;
  if (!name.is_file) {
    // LibreYOLO builds a named YOLOv9 at COCO geometry and replaces only the last class
    // convolutions for another nc, so its class towers keep the 80-class width.
    if (!name.family.empty()) {
      loaded.class_hidden = family(name.family).named_class_hidden(name.size);
      loaded.task = std::string(family(name.family).task());
    }
    loaded.model = build_model(name, class_count, loaded.class_hidden);
    loaded.name = name;
    loaded.class_count = class_count;
    return loaded;
  }
  const std::filesystem::path path = resolve_weights_path(spec, name);
  Checkpoint checkpoint = read_checkpoint(path, name);
  loaded.name.family = checkpoint.family;
  loaded.name.size = checkpoint.size;
  loaded.name.is_file = true;
  loaded.task = checkpoint.task;
  loaded.class_count = checkpoint.class_count;
  loaded.names = checkpoint.names;
  loaded.weights = path;
  loaded.image_size = checkpoint.image_size;
  std::map<std::string, at::Tensor> tensors(checkpoint.model.begin(), checkpoint.model.end());
  const Family& model_family = family(loaded.name.family);
  try {
    model_family.normalise_tensors(tensors);
  } catch (const ModelError& e) {
    throw ModelError(fmt::format("{}: {}", path.string(), e.what()));
  }
  // YOLOv9 training checkpoints (LibreYOLO's and ours) hold the PGI auxiliary branch (aux.*,
  // aux_head.*) too: a training-only path that inference drops. Resume reads it from the file itself.
  if (std::erase_if(tensors, [&](const auto& item) { return model_family.is_training_only_tensor(item.first); }) > 0 && note_dropped) {
    log::info("{}: {} is training-only and not loaded", path.filename().string(), model_family.training_only_branch());
  }
  // A YOLOv9 checkpoint is read at the class-tower width it holds: the formula's for its nc (the
  // released weights, and ours trained before we followed LibreYOLO) or the COCO width (LibreYOLO's trainer).
  loaded.class_hidden = model_family.class_hidden_of(tensors);
  // our training checkpoints mark the family's fine-tune form (RT-DETR from weights: a frozen stem
  // and norms); LibreYOLO's show it in their tensors
  const auto* fine_tune = checkpoint.extra("fine_tune");
  loaded.fine_tune = (fine_tune && fine_tune->isBool() && fine_tune->toBool()) ||
                     model_family.written_in_fine_tune_form(loaded.name.size, tensors);
  loaded.model = build_model(loaded.name, checkpoint.class_count, loaded.class_hidden, loaded.fine_tune);
  try {
    load_state_dict(*loaded.model.module, tensors, /*strict=*/true);
  } catch (const ModelError& e) {
    throw ModelError(fmt::format("{}: the weights do not fit {} with nc={}: {}", path.string(),
                                 loaded.model.display_name, checkpoint.class_count, e.what()));
  }
  if (checkpoint_out) *checkpoint_out = std::move(checkpoint);
  return loaded;
}

}  // namespace libreyolo::models
