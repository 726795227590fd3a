#include "train/checkpoints.h"

#include "train/optimizer.h"

#include <ATen/ATen.h>
#include <yaml-cpp/yaml.h>

namespace libreyolo::train {

namespace {

c10::IValue config_value(const config::Config& config) {
  c10::impl::GenericDict dict(c10::StringType::get(), c10::AnyType::get());
  const YAML::Node root = YAML::Load(config.to_yaml());
  for (const auto& item : root) {
    const std::string key = item.first.as<std::string>();
    if (item.second.IsScalar()) dict.insert(key, item.second.as<std::string>());
    else if (item.second.IsNull()) dict.insert(key, c10::IValue());
    else {
      YAML::Emitter e;
      e << YAML::Flow << item.second;
      dict.insert(key, std::string(e.c_str()));
    }
  }
  return dict;
}

}  // namespace

models::Checkpoint make_checkpoint(Training& t, const TrainState& state, int epoch_done, std::int64_t batches_done) {
  models::Checkpoint c;
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
  c.set_extra("config", config_value(t.config));
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
