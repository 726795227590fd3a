#include "core/error.h"
#include "models/model_name.h"
#include "catch.h"  // last: see catch.h

using namespace libreyolo;
using namespace libreyolo::models;

TEST_CASE("family-size names and LibreYOLO weight names", "[model_name]") {
  const auto yolo9 = parse_model_name("yolo9-t");
  CHECK(yolo9.family == "yolo9");
  CHECK(yolo9.size == "t");
  CHECK_FALSE(yolo9.is_file);
  CHECK(yolo9.weights_name() == "LibreYOLO9t.pt");
  CHECK(parse_model_name("YOLOX-s").weights_name() == "LibreYOLOXs.pt");
  CHECK(parse_model_name("yoloxn").size == "n");

  const auto file = parse_model_name("weights/LibreYOLOXm.pt");
  CHECK(file.is_file);
  CHECK(file.family == "yolox");
  CHECK(file.size == "m");

  const auto checkpoint = parse_model_name("runs/train/exp/weights/best.pt");
  CHECK(checkpoint.is_file);
  CHECK(checkpoint.family.empty());
  CHECK(parse_model_name("x.safetensors").is_file);
}

TEST_CASE("RT-DETR's sizes are several letters long", "[model_name]") {
  const auto r18 = parse_model_name("rtdetr-r18");
  CHECK(r18.family == "rtdetr");
  CHECK(r18.size == "r18");
  CHECK(r18.weights_name() == "LibreRTDETRr18.pt");
  CHECK(parse_model_name("RTDETR-R50M").size == "r50m");
  CHECK(parse_model_name("rtdetrr101").size == "r101");
  const auto file = parse_model_name("LibreRTDETRr50m.pt");
  CHECK(file.family == "rtdetr");
  CHECK(file.size == "r50m");
  CHECK(parse_model_name("rtdetr-l").size == "l");  // HGNetv2-L
  CHECK(parse_model_name("RTDETR-X").size == "x");
  CHECK(parse_model_name("LibreRTDETRx.pt").size == "x");
  CHECK(parse_model_name("last.pt").family.empty());  // a one-letter size does not match any file name
  CHECK(parse_model_name("dfine-n").family == "dfine");  // D-FINE's sizes
  CHECK(parse_model_name("LibreDFINEx.pt").size == "x");
  CHECK_THROWS_AS(parse_model_name("dfine-t"), ModelError);
  // RT-DETRv4 (s, m, l, x) is not RT-DETR of a size "v4-s"
  const auto v4 = parse_model_name("rtdetrv4-s");
  CHECK(v4.family == "rtdetrv4");
  CHECK(v4.size == "s");
  CHECK(v4.weights_name() == "LibreRTDETRv4s.pt");
  CHECK(parse_model_name("RTDETRv4-X").size == "x");
  CHECK(parse_model_name("LibreRTDETRv4m.pt").family == "rtdetrv4");
  CHECK_THROWS_AS(parse_model_name("rtdetrv4-n"), ModelError);
  CHECK(parse_model_name("LibreRTDETRr5.pt").family.empty());  // not a size: a checkpoint that does not say
  CHECK_THROWS_AS(parse_model_name("rtdetr-r"), ModelError);
  CHECK_THROWS_AS(parse_model_name("rtdetr-r18x"), ModelError);
  try {
    parse_model_name("rtdetr-r19");
  } catch (const ModelError& error) {
    CHECK(std::string(error.what()).find("r18, r34, r50, r50m, r101, l, x") != std::string::npos);
  }
}

TEST_CASE("unknown names and sizes are model errors (exit 4)", "[model_name]") {
  CHECK_THROWS_AS(parse_model_name("yolo9-x"), ModelError);
  CHECK_THROWS_AS(parse_model_name("yolov8n"), ModelError);
  CHECK_THROWS_AS(parse_model_name(""), ModelError);
  try {
    parse_model_name("yolo5s");
  } catch (const ModelError& error) {
    CHECK(static_cast<int>(error.exit_code()) == 4);
    CHECK(std::string(error.what()).find("yolo9-t/s/m/c") != std::string::npos);
  }
}

TEST_CASE("YOLOv5's names, as its guide writes them", "[model_name]") {
  CHECK(parse_model_name("yolo7-b").family == "yolo7");
  CHECK(parse_model_name("YOLO7b").size == "b");
  CHECK(parse_model_name("LibreYOLO7b.pt").family == "yolo7");
  CHECK(parse_model_name("yolo7-b").weights_name() == "LibreYOLO7b.pt");
  CHECK(parse_model_name("rtmdet-t").family == "rtmdet");
  CHECK(parse_model_name("RTMDet-x").size == "x");
  CHECK(parse_model_name("LibreRTMDets.pt").size == "s");
  CHECK(parse_model_name("rtdetr-r18").family == "rtdetr");  // rtmdet is not a prefix of it
  const auto s = parse_model_name("yolov5s");
  CHECK(s.family == "yolov5");
  CHECK(s.size == "s");
  CHECK_FALSE(s.is_file);
  CHECK(parse_model_name("YOLOv5-x").size == "x");
  const auto yaml = parse_model_name("yolov5s.yaml");  // --cfg yolov5s.yaml: built from scratch
  CHECK(yaml.family == "yolov5");
  CHECK(yaml.size == "s");
  CHECK_FALSE(yaml.is_file);
  CHECK(parse_model_name("models/yolov5l.yaml").size == "l");
  CHECK(parse_model_name("yolo9-t.yaml").family == "yolo9");
  CHECK_THROWS_AS(parse_model_name("my_custom_net.yaml"), ModelError);
  CHECK(parse_model_name("LibreYOLOv5m.pt").family == "yolov5");
  try {
    parse_model_name("yolov5su");
    FAIL("yolov5su was taken");
  } catch (const ModelError& error) {
    CHECK(std::string(error.what()).find("anchor-free") != std::string::npos);
    CHECK(std::string(error.what()).find("yolov5s") != std::string::npos);
  }
  CHECK_THROWS_AS(parse_model_name("yolov5t"), ModelError);
}
