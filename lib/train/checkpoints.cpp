#include "train/checkpoints.h"

#include "train/optimizer.h"

#include <ATen/ATen.h>

#include <cmath>

namespace libreyolo::train {

namespace {

// A key's value as LibreYOLO's own checkpoints hold it (its TrainConfig.to_dict()): booleans, integers,
// floats, strings, lists and None. LibreYOLO acts on some (bool(config["single_cls"]) in its
// validator, the train arguments a resume restores), where a string 'false' would read as true.
c10::IValue python_value(const config::OptionSpec& spec, const config::Value& value) {
  using config::ValueType;
  if (std::holds_alternative<std::monostate>(value)) return c10::IValue();
  if (const auto* flag = std::get_if<bool>(&value)) return *flag;
  if (const auto* whole = std::get_if<std::int64_t>(&value)) return *whole;
  if (const auto* real = std::get_if<double>(&value)) {
    // a whole number as Python's int: LibreYOLO declares some of our real keys int (warmup_epochs),
    // and an int is a float wherever it declares float
    if (std::isfinite(*real) && *real == std::trunc(*real) && std::abs(*real) < 1e15) return static_cast<std::int64_t>(*real);
    return *real;
  }
  if (const auto* pair = std::get_if<config::RealPair>(&value)) {
    return c10::List<double>({pair->first, pair->second});
  }
  if (const auto* size = std::get_if<config::ImageSize>(&value)) {
    if (size->height == size->width) return static_cast<std::int64_t>(size->height);
    return c10::List<std::int64_t>({size->height, size->width});  // [h, w], as LibreYOLO's imgsz
  }
  const std::string& text = std::get<std::string>(value);
  // a choice or flag-or-path key whose value is a flag (cache=false, resume=false): LibreYOLO's bool
  if ((spec.type == ValueType::choice || spec.type == ValueType::flag_or_path) && (text == "true" || text == "false")) {
    return text == "true";
  }
  return text;
}

}  // namespace

c10::IValue checkpoint_config(const config::Config& config) {
  c10::impl::GenericDict dict(c10::StringType::get(), c10::AnyType::get());
  for (const auto& spec : config.table()) {
    if (!(spec.commands & config::command_train)) continue;  // as train_config.yaml: checkpoints come from training
    dict.insert(std::string(spec.name), python_value(spec, config.value(spec.name)));
  }
  return dict;
}

models::Checkpoint make_checkpoint(Training& t, const TrainState& state, int epoch_done, std::int64_t batches_done) {
  models::Checkpoint c;
  c.task = std::string(t.task->name());
  c.family = std::string(t.net.family->name());
  c.size = t.net.loaded.name.size;
  c.class_count = t.inputs.class_count;
  c.names = t.inputs.data.spec.names;
  c.image_size = t.inputs.image_size;
  c.model = models::state_dict(*t.net.evaluated_model().module);  // written detached, on the CPU
  state.write(c, epoch_done, batches_done);
  c.set_extra("optimizer", optimizer_state(*t.optim.optimizer));
  c.set_extra("train_model", models::tensor_dict(models::state_dict(*t.net.model().module)));
  c.set_extra("is_ema_weights", static_cast<bool>(t.net.ema));
  if (t.net.loaded.fine_tune) c.set_extra("fine_tune", true);  // a resumed run keeps the family's fine-tune form
  if (t.net.ema) c.set_extra("ema_updates", t.net.ema->updates());
  auto args = checkpoint_config(t.config).toGenericDict();
  args.insert_or_assign("best_metric", state.metric_name);  // the column used (an empty best_metric= is the task's)
  c.set_extra("config", args);
  if (t.optim.lr_scale != 1.0) c.set_extra("lr_scale", t.optim.lr_scale);  // a recovered divergence lowered the learning rate
  if (t.precision.scaler->enabled()) {
    c10::impl::GenericDict s(c10::StringType::get(), c10::AnyType::get());
    const auto scaler_state = t.precision.scaler->state();
    s.insert("scale", scaler_state.scale);
    s.insert("growth_tracker", scaler_state.growth_tracker);
    c.set_extra("scaler", s);
  }
  c10::impl::GenericDict rng(c10::StringType::get(), c10::AnyType::get());
  rng.insert("torch", torch::globalContext().defaultGenerator(c10::kCPU).get_state());
  c.set_extra("rng_state", rng);
  return c;
}

}  // namespace libreyolo::train
