// The stages of set_up_training (train/setup.h), each taking only the parts of Training it builds
// or reads, in the order set_up_training runs them. Internal to lib/train.
#pragma once

#include "core/config.h"
#include "models/checkpoint.h"
#include "train/setup.h"
#include "train/train_state.h"

#include <optional>

namespace libreyolo::train {

// The train split, its pipeline and loader, and the val split, as the task reads them (setup_data.cpp).
void set_up_data(const config::Config& config, const eval::Task& task, const Placement& place, Inputs& inputs);

// The model from model=/pretrained= (its fine-tune form, a resumed run's weights and training-only
// branch), frozen layers, the family's fit to the labels, sync_bn, channels-last, the EMA and the
// family's loss (setup_model.cpp). Reads the checkpoint a resumed run continues into `checkpoint`.
void set_up_model(const config::Config& config, const Placement& place, const Inputs& inputs,
                  std::optional<models::Checkpoint>& checkpoint, Network& net);

// Optimizer groups and the schedule (setup_optim.cpp).
void set_up_optimizer(const config::Config& config, const TrainState& state, const Network& net, Optimisation& optim);

// Autocast and the loss scaler, with the family's word on its precision (setup_optim.cpp).
void set_up_amp(const config::Config& config, const Placement& place, const Network& net, Precision& precision);

// cuda_graph=true: a graph manager for the network, or LibreYOLO's one line saying why not (setup_graphs.cpp).
void set_up_cuda_graph(const config::Config& config, const Placement& place, const Inputs& inputs, const Network& net,
                       Graphs& graphs);

// The forms a GPU runs for what the graphs capture (setup_graphs.cpp).
void use_device_forms(Network& net, Optimisation& optim, const Graphs& graphs);

}  // namespace libreyolo::train
