// D-FINE's recipe as libreyolo 1.6.0's DFINEConfig and trainer set it: AdamW 2e-4 with weight decay
// 1e-4, the backbone at backbone_lr_mult (0.5) of the schedule's rate, no decay on norms, biases
// and the learnable affine's scale; flat-then-cosine with 2 warm-up epochs and a 0.05 floor over
// the last 4; clip 0.1; EMA 0.9999; the strong augmentations until 85% of the epochs; 132 epochs. AMP off, as the
// training-performance guide ships it (1.6.0 turns it on).
#pragma once

#include "core/option_table.h"
#include "models/family.h"

#include <span>
#include <string>
#include <vector>

namespace libreyolo::models::detr {

std::vector<config::OptionDefault> dfine_option_defaults(const std::string& size);
// DEIM's (libreyolo 1.6.0's DEIMConfig): AdamW 1e-4, the backbone at the schedule's rate,
// flat_cosine over the last 12 epochs, the strong augmentations until 91%, rotation 10 and
// translation 0.1 (carried, and dropped by the pipeline as 1.6.0 drops them), AMP off as D-FINE's.
std::vector<config::OptionDefault> deim_option_defaults(const std::string& size);
// {backbone, head} x {decay, none}: norms ("norm", ".bn."), biases and "lab.scale" without decay,
// the backbone's groups at `backbone_multiplier`.
ParameterRules dfine_parameter_rules(double backbone_multiplier);
// The D-FINE-style families' own keys: their backbone groups' learning-rate multiple and the EMA
// restart of their reference trainer.
std::span<const config::OptionSpec> dfine_option_keys();

}  // namespace libreyolo::models::detr
