// Which augmentation pipeline a training runs, and how an image fits the square network input:
// its model family's (models::Family::augment_recipe, models::Family::input_fit).
#pragma once

#include <string_view>

namespace libreyolo::data {

// yolov5: yolo9's (Ultralytics') with YOLOv5's load_mosaic (the three partners drawn from the whole
// dataset, the four tiles in shuffled order); detr: RT-DETR's; dfine and deim: D-FINE's and DEIM's
// strong and weak stages (dfine from the image resized to a long side of imgsz, deim from the image
// at its own size, as their trainers load them).
enum class Recipe { yolo9, yolov5, yolox, detr, dfine, deim };
std::string_view recipe_name(Recipe recipe);

// How an image meets the network outside training: letterboxed (aspect kept, grey border, centred
// in a stride-32 rectangle: Ultralytics'), letterboxed into the top-left corner of the imgsz square
// (LibreYOLO's YOLOX, YOLOv7 and RTMDet, whose training pipeline places images there too), or
// stretched to the square (the DETRs' plain resize).
enum class InputFit { letterbox, letterbox_top_left, stretch };

}  // namespace libreyolo::data
