# `train --help` and `cfg` are generated from the option table.
. "$(dirname "$0")/lib.sh"

expect_exit 0 train --help
expect_in "$WORK/out" "epochs=300"
expect_in "$WORK/out" "amp_dtype=float16"
expect_in "$WORK/out" "Ultralytics spelling: lrf"
expect_in "$WORK/out" "mosaic_scale=(0.1,2.0)"
# each family's recipe beside the table default (the families bring their own, lib/models/<family>/recipe.cpp)
expect_in "$WORK/out" "family defaults: yolo9: 0.937, yolox: 0.9"
expect_in "$WORK/out" "family defaults: yolox-n: 416, yolox-t: 416"

expect_exit 0 --help
expect_in "$WORK/out" "train"

# every command lists its keys under --help, as the top-level help promises
for command in val predict info; do
  expect_exit 0 $command --help
  expect_in "$WORK/out" "usage: libreyolo $command key=value"
  expect_in "$WORK/out" "imgsz="
done
expect_exit 0 val -h
expect_in "$WORK/out" "split="
expect_exit 0 predict help
expect_in "$WORK/out" "source="

expect_exit 0 cfg model=yolox-n lrf=0.1
expect_in "$WORK/out" "imgsz                    416                  family"
expect_in "$WORK/out" "min_lr_ratio             0.1                  cli"
expect_in "$WORK/out" "'lrf' is Ultralytics' name"

expect_exit 0 cfg val
expect_in "$WORK/out" "runs/val"

# a family's own keys: --help and cfg name the families that read them
expect_exit 0 train --help
expect_in "$WORK/out" "families: yolo9, yolov5 (the others ignore it, with a warning)"
expect_in "$WORK/out" "family defaults: yolov5: 0.05"
expect_exit 0 cfg model=yolox-n aux_weight=0.5
expect_in "$WORK/out" "aux_weight               0.5                  cli  [yolo9; not read by yolox]"
expect_in "$WORK/out" "lr0 "
expect_exit 0 cfg model=yolov5n
expect_in "$WORK/out" "box                      0.05                 family  [yolo9 yolov5]"

# dry_run prints the resolved YAML on stdout and writes nothing
expect_exit 0 train model=yolo9-t data=coco8 dry_run=true project=dry
expect_in "$WORK/out" "scheduler: \"linear\""
[ -e dry ] && fail "dry_run created the project folder"

# key=value and --key value give the same configuration; leading `detect` is accepted
"$LIBREYOLO" cfg epochs=5 imgsz=320 amp=false >a.txt 2>/dev/null; code_a=$?
"$LIBREYOLO" detect cfg --epochs 5 --imgsz 320 --no-amp >b.txt 2>/dev/null; code_b=$?
[ "$code_a" -eq 0 ] && [ "$code_b" -eq 0 ] || fail "cfg exited $code_a and $code_b, expected 0 and 0"
expect_in a.txt "epochs                   5"
cmp -s a.txt b.txt || fail "key=value and --key value resolved differently"
# info: the published parameter counts and GFLOPs
expect_exit 0 info model=yolox-n
expect_in "$WORK/out" "YOLOX-n summary: 401 layers, 912159 parameters, 912159 gradients, 1.08 GFLOPs at 416"
expect_exit 0 info model=yolo9-t imgsz=320 json=true
expect_in "$WORK/out" '"parameters":2036544'
expect_exit 4 info model=yolov8n
finish
