# COCO JSON datasets without the oracle (test/parity/coco_json.sh checks the counts and the mAP
# against pycocotools): a split naming an instances_*.json, sparse category ids both ways, crowd
# regions and empty boxes left out of training, and each way a JSON can be wrong: exit 3, named.
. "$(dirname "$0")/lib.sh"

"$LIBREYOLO" data synth out=ds synth_size=64 synth_images=2 synth_val_images=2 >/dev/null || fail "data synth failed"
mkdir -p ds/annotations
set -- $(ls ds/images/val)
cat >ds/annotations/instances_val.json <<JSON
{"images": [{"id": 42, "file_name": "$1", "width": 64, "height": 64},
            {"id": 7, "file_name": "$2", "width": 64, "height": 64}],
 "annotations": [{"id": 1, "image_id": 42, "category_id": 90, "bbox": [10, 10, 20, 20], "area": 300, "iscrowd": 0},
                 {"id": 2, "image_id": 42, "category_id": 5, "bbox": [0, 0, 64, 30], "area": 900, "iscrowd": 1},
                 {"id": 3, "image_id": 7, "category_id": 5, "bbox": [50, 50, 30, 30], "area": 196},
                 {"id": 4, "image_id": 7, "category_id": 90, "bbox": [3, 3, 0, 5], "area": 0},
                 {"id": 5, "image_id": 99, "category_id": 90, "bbox": [3, 3, 5, 5], "area": 25},
                 {"id": 6, "image_id": 7, "category_id": 5, "bbox": [9, 9, -5, 4], "area": 20}],
 "categories": [{"id": 90, "name": "toothbrush"}, {"id": 5, "name": "airplane"}]}
JSON
# LibreYOLO's layout would name it under annotations:; a split may also name the JSON itself
printf 'path: .\ntrain: annotations/instances_val.json\nval: annotations/instances_val.json\n' >ds/json_splits.yaml
expect_exit 0 data check data=ds/json_splits.yaml json=true
"$LIBREYOLO" data check data=ds/json_splits.yaml >check.out 2>&1
expect_in check.out "instances_val.json: 2 images, 6 annotations (1 crowd), 2 categories"
# a negative side: named by id, and in neither split; a zero side: named, kept for validation as COCOeval does
expect_in check.out "1 annotation(s) with a negative bbox width or height (id 6 (-5x4)); skipped in training and validation"
expect_in check.out "1 annotation(s) with a bbox width or height of 0 (id 4 (0x5)); left out of training"
# classes in ascending id order: 5 airplane, 90 toothbrush; training keeps 2 boxes (no crowd, no empty box, none of image 99)
expect_in check.out "airplane          1          1"
expect_in check.out "toothbrush          1          1"
expect_in check.out "annotation(s) name an image id that 'images' does not list"
expect_in check.out "val: 2 images, 0 backgrounds, 0 corrupt"

# bad JSON: each names the file and what to do, exit 3
bad() {  # bad NAME JSON EXPECTED
  printf '%s' "$2" >ds/annotations/instances_$1.json
  expect_exit 3 data check data=ds/annotations/instances_$1.json
  expect_in "$WORK/err" "instances_$1.json"
  expect_in "$WORK/err" "$3"
}
bad cut '{"images": [{"id": 1,' "not valid JSON (at byte"
bad list '[1, 2]' "a COCO annotation file is a JSON object"
bad nocats '{"images": [], "annotations": []}' "the key 'categories' is missing"
bad badid '{"images": [{"id": "a", "file_name": "x.jpg", "width": 4, "height": 4}], "categories": [{"id": 1, "name": "a"}]}' \
  "images[0]: 'id' must be an integer"
bad badbox '{"images": [{"id": 1, "file_name": "x.jpg", "width": 4, "height": 4}], "annotations": [{"image_id": 1, "category_id": 1, "bbox": [1, 2]}], "categories": [{"id": 1, "name": "a"}]}' \
  "annotations[0]: 'bbox' must be [x, y, width, height] in pixels"
bad unknown '{"images": [], "annotations": [{"image_id": 1, "category_id": 3, "bbox": [1, 2, 3, 4]}], "categories": [{"id": 1, "name": "a"}]}' \
  "annotations[0]: category_id 3 is not one of the dataset's categories"
bad overflow '{"images": [], "categories": [{"id": 1, "name": "a"}], "x": 2E3333}' "not readable as JSON"
bad twice '{"images": [], "categories": [{"id": 1, "name": "a"}, {"id": 1, "name": "b"}]}' "category id 1 is listed twice"
# a JSON that is not there
expect_exit 3 data check data=ds/annotations/instances_missing.json
expect_in "$WORK/err" "no such file; give a dataset YAML, a COCO instances_*.json or a built-in name"
# no image folder beside the JSON
mkdir -p elsewhere && cp ds/annotations/instances_val.json elsewhere/
expect_exit 3 data check data=elsewhere/instances_val.json
expect_in "$WORK/err" "no image folder found for the 'val' split"
# names in the YAML must name every category
printf 'path: .\nval: annotations/instances_val.json\nnames: [airplane, boat]\n' >ds/names.yaml
expect_exit 3 data check data=ds/names.yaml
expect_in "$WORK/err" "category 'toothbrush' (id 90)"
# an image the JSON lists but the folder lacks: skipped, counted corrupt
rm "ds/images/val/$2"
expect_exit 0 data check data=ds/json_splits.yaml
expect_in "$WORK/out" "image not found (image id 7 of instances_val.json)"
finish
