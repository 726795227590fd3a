// RT-DETR's training pipeline (LibreYOLO's RTDETRTrainTransform, no mosaic): additive HSV -> flips
// -> stretch to the square; boxes under 1 px dropped.
#pragma once

#include "data/sample_pipeline.h"

#include <memory>

namespace libreyolo::models::rtdetr {

std::shared_ptr<const data::SamplePipeline> sample_pipeline();

}  // namespace libreyolo::models::rtdetr
