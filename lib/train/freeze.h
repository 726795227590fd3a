// freeze= (LibreYOLO / Ultralytics): a count N freezes the family's first N layer groups, a list
// takes group indices and module names (`backbone`, `neck.elan_up1`). Frozen parameters stop
// requiring gradients, so they get no update and no weight decay (the optimizer groups skip
// them), and frozen BatchNorm layers keep their statistics (they stay in eval mode).
#pragma once

#include <torch/nn/module.h>

#include <memory>
#include <string>
#include <vector>

namespace libreyolo::train {

struct FrozenLayers {
  std::vector<std::string> prefixes;  // state-dict prefixes, "backbone.conv0."
  std::int64_t tensors = 0, parameters = 0;
  std::vector<std::shared_ptr<torch::nn::Module>> batch_norms;  // kept in eval mode
  bool empty() const { return prefixes.empty(); }
  // module->train() plus the frozen BatchNorm layers back in eval mode.
  void set_train_mode(torch::nn::Module& module) const;
};

// `groups`: the family's layer groups in order (state-dict prefixes ending in "."). Throws
// UsageError (naming freeze=) for an index out of range, a name that matches nothing, or a freeze
// that would leave nothing to train. Logs how many tensors and parameters are frozen.
FrozenLayers freeze_layers(torch::nn::Module& module, const std::string& spec, const std::vector<std::string>& groups);

}  // namespace libreyolo::train
