#include "train/freeze.h"

#include "core/error.h"
#include "core/log.h"

#include <torch/nn/modules/batchnorm.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>

namespace libreyolo::train {

namespace {

std::string trim(std::string text) {
  const auto not_space = [](unsigned char c) { return !std::isspace(c); };
  text.erase(text.begin(), std::find_if(text.begin(), text.end(), not_space));
  text.erase(std::find_if(text.rbegin(), text.rend(), not_space).base(), text.end());
  return text;
}

std::optional<int> as_index(const std::string& text) {
  int value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// The selectors of freeze=: "" / none / false -> none; "N" -> 0..N-1; "[0, 2, backbone]" or
// "0,2,backbone" -> each item.
std::vector<std::string> selectors_of(std::string spec) {
  spec = trim(spec);
  if (spec.empty() || spec == "none" || spec == "false" || spec == "null") return {};
  if (spec.front() == '[' && spec.back() == ']') spec = spec.substr(1, spec.size() - 2);
  if (spec.find(',') == std::string::npos) {
    if (const auto count = as_index(spec)) {
      if (*count < 0) throw UsageError(fmt::format("freeze={}: a count must be ≥ 0", spec));
      std::vector<std::string> out;
      for (int i = 0; i < *count; ++i) out.push_back(std::to_string(i));
      return out;
    }
  }
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= spec.size()) {
    const std::size_t comma = std::min(spec.find(',', start), spec.size());
    std::string item = trim(spec.substr(start, comma - start));
    if (item.size() >= 2 && (item.front() == '\'' || item.front() == '"')) item = item.substr(1, item.size() - 2);
    if (!item.empty()) out.push_back(item);
    start = comma + 1;
  }
  return out;
}

}  // namespace

void FrozenLayers::set_train_mode(torch::nn::Module& module) const {
  module.train();
  for (const auto& bn : batch_norms) bn->eval();
}

FrozenLayers freeze_layers(torch::nn::Module& module, const std::string& spec, const std::vector<std::string>& groups) {
  FrozenLayers frozen;
  for (const auto& selector : selectors_of(spec)) {
    if (const auto index = as_index(selector)) {
      if (*index < 0 || *index >= static_cast<int>(groups.size())) {
        throw UsageError(fmt::format("freeze={}: layer {} is out of range; this model has {} layer groups (0-{}): {}", spec,
                                     *index, groups.size(), groups.size() - 1, fmt::join(groups, " ")));
      }
      frozen.prefixes.push_back(groups[static_cast<std::size_t>(*index)]);
    } else {
      std::string name = selector.rfind("model.", 0) == 0 ? selector.substr(6) : selector;
      if (!name.ends_with(".")) name += ".";
      frozen.prefixes.push_back(name);
    }
  }
  if (frozen.empty()) return frozen;
  const auto is_frozen = [&](const std::string& name) {
    return std::any_of(frozen.prefixes.begin(), frozen.prefixes.end(), [&](const auto& p) { return name.rfind(p, 0) == 0; });
  };
  std::int64_t trainable = 0;
  std::vector<int> matched(frozen.prefixes.size(), 0);
  for (auto& item : module.named_parameters()) {
    at::Tensor parameter = item.value();
    for (std::size_t i = 0; i < frozen.prefixes.size(); ++i) matched[i] += item.key().rfind(frozen.prefixes[i], 0) == 0;
    if (is_frozen(item.key())) {
      parameter.set_requires_grad(false);
      ++frozen.tensors;
      frozen.parameters += parameter.numel();
    } else if (parameter.requires_grad()) {
      ++trainable;
    }
  }
  for (std::size_t i = 0; i < frozen.prefixes.size(); ++i) {
    if (!matched[i]) {
      throw UsageError(fmt::format("freeze={}: '{}' matches no parameter; use a layer index or one of: {}", spec,
                                   frozen.prefixes[i].substr(0, frozen.prefixes[i].size() - 1), fmt::join(groups, " ")));
    }
  }
  if (trainable == 0) throw UsageError(fmt::format("freeze={} would leave no trainable parameter; freeze fewer layers", spec));
  for (const auto& item : module.named_modules()) {
    if (is_frozen(item.key() + ".") && dynamic_cast<torch::nn::BatchNorm2dImpl*>(item.value().get())) {
      frozen.batch_norms.push_back(item.value());
    }
  }
  log::info("Freezing {} parameter tensors ({} parameters) in {}", frozen.tensors, frozen.parameters, fmt::join(frozen.prefixes, " "));
  return frozen;
}

}  // namespace libreyolo::train
