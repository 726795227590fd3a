// D-FINE's and DEIM's training pipeline (libreyolo 1.6.0's DetrTrainTransform): photometric
// distortion -> zoom-out -> IoU crop -> sanitize (the strong stage, images with boxes only) ->
// flip -> stretch to the square. `original_size`: DEIM's trainer loads the image at its own size;
// D-FINE's resized to imgsz's long side.
#pragma once

#include "data/sample_pipeline.h"

#include <memory>

namespace libreyolo::models::detr {

std::shared_ptr<const data::SamplePipeline> dfine_pipeline(bool original_size);

}  // namespace libreyolo::models::detr
