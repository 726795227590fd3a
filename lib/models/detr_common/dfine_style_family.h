// D-FINE's network and trainer behind the Family interface (models/family.h), for the families that
// build on them (D-FINE, DEIM, RT-DETRv4: each folder specifies its own with a DfineStyleSpec): the
// network whose training forward takes the batch's targets (its denoising queries), the FDR set
// loss, top-k postprocess without NMS, the stretched square input, AMP off by default.
#pragma once

#include "models/detr_common/dfine_decoder.h"
#include "models/detr_common/dfine_model.h"
#include "models/family.h"

#include <ATen/Tensor.h>

#include <functional>
#include <memory>
#include <string_view>
#include <vector>

namespace libreyolo::models::detr {

// What a family built on D-FINE's network and trainer says of itself.
struct DfineStyleSpec {
  std::string_view name{};            // the registered name ("dfine")
  std::string_view display{};         // as messages name it ("D-FINE")
  std::string_view weights_prefix{};  // LibreYOLO's weight files: <prefix><size>.pt
  std::vector<std::string> sizes{};   // of dfine_sizes()
  DfineVariant network = DfineVariant::dfine;
  // DEIM's trainer: MAL in place of VFL, the image loaded at its own size, imgsz three times
  // among multi_scale's sizes. false: D-FINE's (VFL, the image resized to imgsz's long side).
  bool deim_trainer = false;
  // A state-dict key only this family's files hold (for a file that does not say its family), and
  // its precedence where another family knows the file's keys too (Family::key_precedence).
  std::function<bool(std::string_view)> recognises_key{};
  int key_precedence = 0;
  // The tensors of a training-only branch (a prefix; empty: none), and that branch named for the log.
  std::string_view training_only_prefix{};
  std::string_view training_only_branch{};
  std::function<std::vector<config::OptionDefault>(const std::string& size)> option_defaults{};
};
std::unique_ptr<Family> make_dfine_style_family(DfineStyleSpec spec);

// The outputs as the trainer carries a network's maps: a header [auxiliary levels, denoising
// levels, denoising groups, images with denoising positives, input width, input height] (int64,
// CPU), the decoder's up and reg_scale, the last level's logits, boxes, corners and references, each auxiliary level's, the pre
// and encoder levels' logits and boxes, each denoising level's four, the denoising pre level's
// two, then the images' denoising positives.
std::vector<at::Tensor> pack_dfine_outputs(const DfineOutputs& outputs, std::int64_t width, std::int64_t height);
struct PackedDfineOutputs {
  DfineOutputs outputs;
  std::int64_t width = 0, height = 0;
};
PackedDfineOutputs unpack_dfine_outputs(const std::vector<at::Tensor>& packed);

}  // namespace libreyolo::models::detr
