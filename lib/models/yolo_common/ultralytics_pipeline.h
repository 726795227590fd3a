// Ultralytics' training pipeline (v8_transforms), which YOLOv9 trains with: mosaic -> random
// perspective -> Beta mixup -> multiplicative HSV -> flips; without mosaic: letterbox -> random
// perspective. YOLOv5's (its LoadImagesAndLabels) is the same with load_mosaic's draws: the three
// partners from the whole dataset and the four tiles in a random order.
#pragma once

#include "data/sample_pipeline.h"

#include <memory>

namespace libreyolo::models::yolo_common {

std::shared_ptr<const data::SamplePipeline> ultralytics_pipeline(bool yolov5_mosaic);

}  // namespace libreyolo::models::yolo_common
