// YOLOX's training pipeline (MosaicDetection + TrainTransform), which YOLOX, YOLOv7 and RTMDet
// train with in LibreYOLO: mosaic -> random affine -> jittered-paste mixup -> additive HSV ->
// flip -> top-left fit; boxes under 1 px dropped. Its dataset truncates the resize.
#pragma once

#include "data/sample_pipeline.h"

#include <memory>

namespace libreyolo::models::yolo_common {

std::shared_ptr<const data::SamplePipeline> yolox_pipeline();

}  // namespace libreyolo::models::yolo_common
