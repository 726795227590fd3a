// The option table's keys, by part (core/option_table.cpp puts them together in this order):
// model, data and the loop; optimizer, schedule, augmentation, loss and EMA; validation,
// prediction, output, profiler and the other commands. Internal to lib/core.
#pragma once

#include "core/option_table.h"

#include <span>

namespace libreyolo::config::keys {

using T = ValueType;
using S = Support;
inline constexpr unsigned train = command_train;
inline constexpr unsigned train_val = command_train | command_val;
inline constexpr unsigned train_profile = command_train | command_profile;
inline constexpr unsigned run_model = command_train | command_val | command_predict | command_profile;
inline constexpr unsigned train_data = command_train | command_data;  // training keys `libreyolo data preview|bench` use too
inline constexpr double unbounded = 1e12;

std::span<const OptionSpec> run_keys();     // option_keys_run.cpp
std::span<const OptionSpec> recipe_keys();  // option_keys_recipe.cpp
std::span<const OptionSpec> output_keys();  // option_keys_output.cpp

}  // namespace libreyolo::config::keys
