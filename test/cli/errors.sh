# Each error class exits with its code and prints exactly one line on stderr.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/tiny_dataset.sh"
make_tiny_dataset ds

expect_exit 2 train data=coco8 epoch=3
expect_in "$WORK/err" "Similar keys: epochs=300"
expect_lines "$WORK/err" 1

expect_exit 2 train data=coco8 epochs=1.5
expect_in "$WORK/err" "'epochs=1.5'"
expect_lines "$WORK/err" 1

expect_exit 2 train data=coco8 lr0=3
expect_in "$WORK/err" "out of range"

expect_exit 2 train data=coco8 amp_dtype=int8
expect_in "$WORK/err" "float16, bfloat16"

expect_exit 2 train model=yolo9-t
expect_in "$WORK/err" "data= is required"

# a DETR at a size with fewer encoder positions than its 300 queries: refused before the data scan
# and the run folder, with the smallest size that works (D-FINE-n sees strides 16 and 32 only)
expect_exit 2 train model=dfine-n data=ds/data.yaml imgsz=96 project=runs name=small
expect_in "$WORK/err" "imgsz=96 gives only 45: use imgsz=256 or more"
expect_lines "$WORK/err" 1
[ -e runs/small ] && fail "a refused imgsz made the run folder runs/small"
expect_exit 2 train model=rtdetr-r18 data=ds/data.yaml imgsz=96 project=runs name=small
expect_in "$WORK/err" "use imgsz=128 or more"
expect_exit 2 train model=deim-n data=ds/data.yaml imgsz=288 multi_scale=true project=runs name=small
expect_in "$WORK/err" "multi_scale=true draws batches down to 192 px"

expect_exit 2 nosuchcommand
expect_in "$WORK/err" "unknown command"

expect_exit 3 train model=yolo9-t data=missing_dataset.yaml
expect_in "$WORK/err" "missing_dataset.yaml"
expect_lines "$WORK/err" 1

expect_exit 4 train model=yolov6s data=coco8
expect_in "$WORK/err" "not a known model"
expect_lines "$WORK/err" 1
# Ultralytics' yolov5su is another network than the YOLOv5 we train: said so, with ours named
expect_exit 4 train model=yolov5su data=coco8
expect_in "$WORK/err" "anchor-free"
expect_in "$WORK/err" "yolov5s"

expect_exit 4 info model=LibreYOLO9s.pt
expect_in "$WORK/err" "weights/LibreYOLO9s.pt"
expect_in "$WORK/err" "huggingface.co/LibreYOLO"
expect_lines "$WORK/err" 1
printf 'not a zip' > "$WORK/broken.pt"
expect_exit 4 info model="$WORK/broken.pt"
expect_in "$WORK/err" "not a readable torch.save file"
"$LIBREYOLO" data synth out="$WORK/ds" synth_images=4 synth_val_images=2 synth_size=64 quiet=true >/dev/null 2>&1 &&
  "$LIBREYOLO" train model=yolo9-t data="$WORK/ds/data.yaml" epochs=1 imgsz=64 batch=4 val=false quiet=true \
    project="$WORK/runs" name=cut >/dev/null 2>&1 || fail "the training that writes a checkpoint to cut short failed"
head -c 50000 "$WORK/runs/cut/weights/last.pt" > "$WORK/cut.pt"
expect_exit 4 val model="$WORK/cut.pt" data="$WORK/ds/data.yaml" imgsz=64
expect_in "$WORK/err" "cut.pt: the file is cut short (50000 bytes, no zip end record)"
grep -q miniz "$WORK/err" && fail "a cut checkpoint shows LibTorch's miniz text: $(cat "$WORK/err")"
# a safetensors header whose shape asks for 40 PB: refused before any allocation
header='{"w":{"dtype":"F32","shape":[100000,100000,1000000],"data_offsets":[0,4]}}'
{ printf '\112\000\000\000\000\000\000\000'; printf '%s' "$header"; printf '\000\000\000\000'; } > "$WORK/huge.safetensors"
[ "${#header}" -eq 74 ] || fail "the test's header length changed (${#header}); fix the length byte"
expect_exit 4 info model="$WORK/huge.safetensors"
expect_in "$WORK/err" "tensor 'w' has shape [100000, 100000, 1000000] and byte range [0, 4] that do not fit"
expect_lines "$WORK/err" 1
expect_exit 4 train model="$WORK/huge.safetensors" data=ds/data.yaml epochs=1 imgsz=64 project=runs name=huge

# runtime: the project folder cannot be created (a file is in the way)
touch blocked
expect_exit 1 train model=yolo9-t data=ds/data.yaml project=blocked/runs quiet=true
expect_in "$WORK/err" "blocked/runs"
grep -v "^WARNING: ignoring corrupt" "$WORK/err" >err_lines
expect_lines err_lines 1
finish
