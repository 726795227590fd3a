// YOLOX training objective as LibreYOLO (and current YOLOX) computes it: SimOTA
// (yolo_common/simota.h) over the head's decoded maps, with the L1 term on its raw offsets.
#pragma once

#include "models/loss_terms.h"
#include "models/yolo_common/simota.h"
#include "models/targets.h"

#include <ATen/Tensor.h>

#include <string>
#include <utility>
#include <vector>

namespace libreyolo::models::yolox {

using LossOptions = yolo_common::SimOtaLossOptions;

// Parts: iou_loss (gain included), obj_loss, cls_loss, l1_loss and num_fg (per ground-truth
// box), as LibreYOLO logs them.
using models::LossTerms;

// `maps`: the head's per-level raw training outputs [B, 5 + nc, H, W]; strides 8/16/32.
LossTerms loss(const std::vector<at::Tensor>& maps, const TargetBatch& targets, const LossOptions& options);

}  // namespace libreyolo::models::yolox
