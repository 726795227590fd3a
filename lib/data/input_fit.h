// How an image fits the square network input: its model family's (models::Family::input_fit).
#pragma once

namespace libreyolo::data {

// How an image meets the network outside training: letterboxed (aspect kept, grey border, centred
// in a stride-32 rectangle: Ultralytics'), letterboxed into the top-left corner of the imgsz square
// (LibreYOLO's YOLOX, YOLOv7 and RTMDet, whose training pipeline places images there too), or
// stretched to the square (the DETRs' plain resize).
enum class InputFit { letterbox, letterbox_top_left, stretch };

}  // namespace libreyolo::data
