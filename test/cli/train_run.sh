# A short real training run: every run file is written, --json prints the result object,
# checkpoints load back (info model=last.pt), and val on the result works.
. "$(dirname "$0")/lib.sh"
"$LIBREYOLO" data synth out=ds synth_images=16 synth_val_images=8 synth_size=64 quiet=true >/dev/null 2>&1 || { echo "synth failed"; exit 1; }

expect_exit 0 train model=yolo9-t data=ds/data.yaml epochs=2 batch=8 imgsz=64 workers=1 eval_interval=1 \
  project=runs name=a --json
run=runs/a
for f in weights/last.pt weights/best.pt results.csv metrics.jsonl status.json train.log curves.svg train_config.yaml; do
  [ -s "$run/$f" ] || fail "missing $run/$f"
done
expect_in "$run/results.csv" "epoch,time,train/loss,validated,is_best,current_metric,current_metric_name,best_metric,best_metric_name,best_epoch,train/box_loss,train/cls_loss,train/dfl_loss"
expect_in "$run/results.csv" "metrics/mAP50-95"
expect_in "$run/results.csv" "lr/group0"
expect_lines "$run/metrics.jsonl" 2
expect_in "$run/status.json" '"state": "completed"'
expect_in "$run/curves.svg" "<svg"
expect_in "$run/train.log" "Validation - mAP50"
expect_in "$WORK/out" '"best_mAP50_95"'
expect_in "$WORK/out" '"state":"completed"'
expect_in "$WORK/err" "Class     Images  Instances"

# the checkpoint names its family, size and classes
expect_exit 0 info model="$run/weights/last.pt" --json
expect_in "$WORK/out" '"model":"YOLOv9-t"'
expect_in "$WORK/out" '"nc":4'

# val on the result: the table, --json metrics, COCO-format predictions.json
expect_exit 0 val model="$run/weights/best.pt" data=ds/data.yaml imgsz=64 batch=4 conf=0.000001 save_json=true name=v --json
expect_in "$WORK/out" '"metrics/mAP50-95"'
expect_in "$WORK/err" "Class     Images  Instances"
[ -s runs/val/v/predictions.json ] || fail "no predictions.json"
expect_in runs/val/v/predictions.json '"category_id"'

# predict names an unreadable image and goes on with the others; all unreadable is a data error (3)
mkdir -p mixed bad && cp ds/images/val/*.jpg mixed/ && echo "not an image" > mixed/zz_broken.jpg && echo "no" > bad/a.jpg
expect_exit 0 predict model="$run/weights/last.pt" source=mixed imgsz=64 name=mixed
expect_in "$WORK/err" "skipped mixed/zz_broken.jpg: cannot identify image file"
expect_in "$WORK/err" "(1 unreadable skipped)"
expect_exit 3 predict model="$run/weights/last.pt" source=bad imgsz=64 name=bad
expect_in "$WORK/err" "none of the 1 images could be read (the first: bad/a.jpg)"

# predict: drawn images and YOLO txt rows for each source image
expect_exit 0 predict model="$run/weights/last.pt" source=ds/images/val imgsz=64 conf=0.000001 name=p
n=$(ls runs/predict/p/*.jpg 2>/dev/null | wc -l)
[ "$n" -eq 8 ] || fail "predict wrote $n images, expected 8"
[ -d runs/predict/p/labels ] || fail "no labels folder"

# YOLOX trains too (SimOTA, L1 term in the no-augmentation epochs)
expect_exit 0 train model=yolox-n data=ds/data.yaml epochs=2 no_aug_epochs=1 batch=8 imgsz=64 workers=1 \
  project=runs name=x quiet=true
expect_in "runs/x/results.csv" "train/l1_loss"
expect_in "runs/x/train.log" "L1 loss on"
finish
